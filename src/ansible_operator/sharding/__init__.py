"""Replicas that share the objects: a ring of Leases (ring.py) and the hash
buckets each replica reconciles (buckets.py, assignment.py); the share the
informers keep to is kube/object_share.py, the key kube/shard_keys.py."""
