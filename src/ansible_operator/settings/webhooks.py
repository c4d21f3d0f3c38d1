"""Admission webhooks (watches.yaml `- webhook:` entries; webhooks/service.py):
where they are served, with which certificate, and where the API server calls."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ansible_operator.settings.declare import setting
from ansible_operator.settings.parsers import checked_by

SERVICE_PORT = 443


def parse_bind_address(address: str) -> tuple[str, int] | None:
    """':9443' -> all interfaces; '127.0.0.1:0' -> a free port; '0' -> no webhooks."""
    if address in ("", "0"):
        return None
    host, _, port = address.rpartition(":")
    if not port.isdigit() or int(port) > 65535:
        raise ValueError(f"--webhook-bind-address must be HOST:PORT or :PORT, not {address!r}")
    return (host or "0.0.0.0", int(port))


def parse_service(text: str) -> tuple[str, str, int]:
    """`NAMESPACE/NAME[:PORT]`."""
    where, _, port = text.partition(":")
    namespace, _, name = where.partition("/")
    if not namespace or not name or (port and not port.isdigit()):
        raise ValueError(f"--webhook-service must be NAMESPACE/NAME[:PORT], not {text!r}")
    return namespace, name, int(port) if port else SERVICE_PORT


def parse_secret(text: str) -> tuple[str, str]:
    namespace, _, name = text.partition("/")
    if not namespace or not name:
        raise ValueError(f"--webhook-ca-secret must be NAMESPACE/NAME, not {text!r}")
    return namespace, name


@dataclass(frozen=True)
class WebhookSettings:
    bind_address: str = field(  # '0': no webhook server
        default=":9443",
        metadata=setting(
            "--webhook-bind-address",
            parse=checked_by(parse_bind_address),
            help="HTTPS address of the admission webhooks ('0' disables; default: %(default)s)",
        ),
    )
    cert_dir: Path | None = field(  # tls.crt, tls.key (+ ca.crt); None: made here
        default=None,
        metadata=setting(
            "--webhook-cert-dir",
            parse=Path,
            help="directory with tls.crt, tls.key and optionally ca.crt (cert-manager style; "
            "default: a CA kept in a Secret, and a certificate made at start)",
        ),
    )
    manage_configurations: bool = field(
        default=True,
        metadata=setting(
            "--webhook-manage-configurations",
            boolean=True,
            help="create and update the Mutating/ValidatingWebhookConfiguration "
            "(caBundle included)",
        ),
    )
    configuration_name: str | None = field(  # None: the leader election id
        default=None,
        metadata=setting(
            "--webhook-configuration-name",
            help="name of the webhook configurations (default: --leader-election-id)",
        ),
    )
    service: str | None = field(
        default=None,
        metadata=setting(
            "--webhook-service",
            parse=checked_by(parse_service),
            metavar="NAMESPACE/NAME[:PORT]",
            help="the Service the API server calls (default in a cluster: "
            "<configuration name>-webhook-service in the operator's namespace, port 443)",
        ),
    )
    url: str | None = field(
        default=None,
        metadata=setting(
            "--webhook-url",
            help="a base URL the API server calls instead of a Service "
            "(default outside a cluster: https://127.0.0.1:<port>)",
        ),
    )
    ca_secret: str | None = field(
        default=None,
        metadata=setting(
            "--webhook-ca-secret",
            parse=checked_by(parse_secret),
            metavar="NAMESPACE/NAME",
            help="the Secret keeping the webhooks' CA (default with a Service: "
            "<configuration name>-webhook-ca beside it; outside a cluster: none, "
            "a new CA each start)",
        ),
    )
    max_concurrent_runs: int | None = field(  # None: twice the CPUs
        default=None,
        metadata=setting(
            "--webhook-max-concurrent-runs",
            parse=int,
            metavar="N",
            help="admission runs at once (default: twice the number of CPUs)",
        ),
    )
    client_ca: Path | None = field(  # PEM CA; given: clients must present a cert of it
        default=None,
        metadata=setting(
            "--webhook-client-ca",
            parse=Path,
            env="ANSIBLE_OPERATOR_WEBHOOK_CLIENT_CA",
            metavar="FILE",
            help="PEM CA file: the webhook server accepts only clients with a certificate it "
            "issued, as the API server presents when its AdmissionConfiguration gives one "
            "(default: $ANSIBLE_OPERATOR_WEBHOOK_CLIENT_CA; none: any client, rate-limited)",
        ),
    )
