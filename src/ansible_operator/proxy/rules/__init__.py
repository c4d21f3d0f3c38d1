"""The proxy's rules, one concern each; pipeline.py puts them in order."""
