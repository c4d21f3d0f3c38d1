"""Warm runner mode: runs fork from a warm runner that has imported
ansible-runner and Ansible, and modules from a warm module interpreter.

The operator's side is processes.py (start the two processes, read their
verdicts and hit counts); run_server.py and module_server.py are the two
processes; accelerations.py lists what makes their runs faster, each
accelerator a module of its own with its probe and its installers
(acceleration.py says what a record holds and when each phase installs).
"""
