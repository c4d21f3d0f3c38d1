"""The API proxy that runs' Kubernetes calls go through."""

from __future__ import annotations

from dataclasses import dataclass, field

from ansible_operator.settings.declare import setting


@dataclass(frozen=True)
class ProxySettings:
    port: int = field(
        default=8888,
        metadata=setting(
            "--proxy-port", parse=int, help="API proxy port on 127.0.0.1 (0: any free port)"
        ),
    )
    inject_owner_ref: bool = field(
        default=True,
        metadata=setting(
            "--inject-owner-ref",
            boolean=True,
            help="inject owner references into what runs create",
        ),
    )
