"""Running Ansible for one object: run directory, ansible-runner process, event receiver.

The face: `host.RunnerHost` runs a `plan.RunPlan` (named by its caller) and
returns a `result.RunResult`; `run.plan_for` makes a reconcile's plan.
"""
