"""Kubernetes access: configuration and auth, the async API client, discovery and informers."""
