"""Running Ansible for one object: run directory, ansible-runner process, event receiver."""
