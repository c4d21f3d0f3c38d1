"""An operator project as the reference defines it: watches.yaml, roles, a run's extra vars."""
