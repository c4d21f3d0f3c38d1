"""ansible-operator: a Kubernetes operator runtime driven by Ansible roles and playbooks."""

__version__ = "0.1.0"
