"""Replicas that share the objects: a ring of Leases (ring.py), the hash
buckets each replica reconciles (buckets.py, assignment.py), and the scope
that limits a replica's informers to its share (scope.py)."""
