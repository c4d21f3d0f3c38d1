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
    coerce_strings: bool = field(
        default=True,
        metadata=setting(
            "--coerce-string-fields",
            boolean=True,
            help="send a number or boolean a run puts where a core kind wants a string "
            "(labels, annotations, ConfigMap and Secret data) as the string ansible-core "
            "2.18 rendered, with a Warning Event naming the task (2.19+ keeps a template's "
            "type, and the API server refuses it there)",
        ),
    )
