"""The Kubernetes API proxy that every run talks through."""
