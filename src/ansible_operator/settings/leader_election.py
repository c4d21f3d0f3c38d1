"""Which replicas reconcile: one leader holding a Lease (--leader-elect), or
every replica of a shard ring, each its share of the objects (--shard-ring)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ansible_operator.settings.declare import setting
from ansible_operator.settings.parsers import go_duration


@dataclass(frozen=True)
class LeaderElectionSettings:
    enabled: bool = field(
        default=False,
        metadata=setting("--leader-elect", boolean=True, help="run only while holding a Lease"),
    )
    id: str = field(default="ansible-operator", metadata=setting("--leader-election-id"))
    namespace: str | None = field(  # None: the pod's
        default=None, metadata=setting("--leader-election-namespace")
    )
    lease_duration: float = field(
        default=15.0,
        metadata=setting("--leader-elect-lease-duration", parse=go_duration, metavar="DURATION"),
    )
    renew_deadline: float = field(
        default=10.0,
        metadata=setting("--leader-elect-renew-deadline", parse=go_duration, metavar="DURATION"),
    )
    shard_ring: str | None = field(
        default=None,
        metadata=setting(
            "--shard-ring",
            env="SHARD_RING",
            metavar="NAME",
            help="share the objects with every replica of this ring (by uid, each "
            "replica holding a Lease of its own; docs/reference.md, Sharding); the "
            "--leader-elect-* durations time its Leases; not with --leader-elect",
        ),
    )
    retry_period: float = field(
        default=2.0,
        metadata=setting("--leader-elect-retry-period", parse=go_duration, metavar="DURATION"),
    )
