"""The Kubernetes API proxy that every run talks through.

server.py (the socket, its lifetime, the runs' grants: grants.py) hands each
request, as an `Exchange` (exchange.py), to the rules pipeline.py lists, one
module each in rules/. What they share: headers.py, streams.py, statuses.py,
ownership.py and paths.py (pure decisions), cache_view.py and writes.py (the
proxy's two windows on the operator: its informers, its dependent registry).
"""
