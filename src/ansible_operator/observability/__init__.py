"""What the operator tells: logs, Prometheus metrics, users' metrics."""
