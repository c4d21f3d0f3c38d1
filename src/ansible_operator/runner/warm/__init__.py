"""Warm runner mode: runs fork from a warm runner that has imported
ansible-runner and Ansible, and modules from a warm module interpreter.

The operator's side is launcher.py (a Launcher, runner/launcher.py: runs
forked from the warm runner), keeper.py (replaced when it exits) and
processes.py (start the two processes, read their verdicts and hit counts);
zygote.py makes the warm runner of a fork of the operator. run_server.py
and module_server.py are the two processes (forkserver.py, module_requests.py,
hits.py, ansible_settings.py: what they share). accelerations/ is what makes
their runs faster, one module per acceleration with its probe and its
installers (acceleration.py says what a record holds and when each phase
installs). Nothing of runner/ outside this package imports it.
"""
