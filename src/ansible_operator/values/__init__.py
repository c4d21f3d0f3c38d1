"""Values and small utilities: no knowledge of Kubernetes, Ansible or the runtime."""
