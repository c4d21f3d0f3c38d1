"""The metrics server and the health probes."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ansible_operator.settings.declare import setting
from ansible_operator.settings.parsers import go_duration

# How long the API server may be unreachable before /readyz, then /healthz, fail.
DEFAULT_API_SERVER_READY_GRACE = 30.0
DEFAULT_API_SERVER_LIVE_GRACE = 300.0


@dataclass(frozen=True)
class MetricsSettings:
    bind_address: str | None = field(  # None: loopback unless secure
        default=None,
        metadata=setting(
            "--metrics-bind-address",
            "--metrics-addr",
            help="metrics server address ('0' disables; default: :8443 with --metrics-secure, "
            "else 127.0.0.1:8443)",
        ),
    )
    secure: bool = field(  # HTTPS, and TokenReview + SubjectAccessReview
        default=False,
        metadata=setting(
            "--metrics-secure",
            boolean=True,
            help="serve metrics over HTTPS to clients the API server authenticates "
            "(TokenReview) and authorizes for GET /metrics (SubjectAccessReview)",
        ),
    )
    require_rbac: bool = field(  # TokenReview + SubjectAccessReview, over HTTP too
        default=False,
        metadata=setting(
            "--metrics-require-rbac",
            boolean=True,
            help="authenticate and authorize metrics clients, over HTTP too",
        ),
    )
    cert_path: Path | None = field(  # tls.crt and tls.key; None: self-signed
        default=None,
        metadata=setting(
            "--metrics-cert-path",
            parse=Path,
            help="directory of the metrics server's certificate (default: a self-signed one)",
        ),
    )
    cert_name: str = field(default="tls.crt", metadata=setting("--metrics-cert-name"))
    cert_key: str = field(default="tls.key", metadata=setting("--metrics-cert-key"))


@dataclass(frozen=True)
class HealthSettings:
    probe_bind_address: str = field(
        default=":6789",
        metadata=setting("--health-probe-bind-address", help="health probe address ('0' disables)"),
    )
    bound_addresses_file: Path | None = field(
        default=None,
        metadata=setting(
            "--bound-addresses-file",
            parse=Path,
            metavar="FILE",
            help="once the operator's servers listen, write the addresses they bound (health, "
            "metrics, proxy, webhook) to FILE as JSON: where ':0' ports ended up",
        ),
    )
    api_server_ready_grace: float = field(  # 0: never fails /readyz
        default=DEFAULT_API_SERVER_READY_GRACE,
        metadata=setting(
            "--api-server-ready-grace",
            parse=go_duration,
            metavar="DURATION",
            help="/readyz fails once the API server has been unreachable this long "
            "(default: 30s; 0: never)",
        ),
    )
    api_server_live_grace: float = field(  # 0: never fails /healthz
        default=DEFAULT_API_SERVER_LIVE_GRACE,
        metadata=setting(
            "--api-server-live-grace",
            parse=go_duration,
            metavar="DURATION",
            help="/healthz fails once the API server has been unreachable this long, "
            "so that a restart may help (default: 5m; 0: never)",
        ),
    )
