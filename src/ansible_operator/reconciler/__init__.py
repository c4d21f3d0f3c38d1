"""The Ansible reconciler: one object reconciled by its role or playbook, its status, Events."""
