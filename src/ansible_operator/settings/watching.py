"""What the operator watches, and as whom it talks to the API server."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

from ansible_operator.settings.declare import setting
from ansible_operator.settings.parsers import comma_list


def impersonation(text: str) -> str:
    from ansible_operator.kube.impersonation import impersonated_user

    try:
        return impersonated_user(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


@dataclass(frozen=True)
class WatchingSettings:
    watches_file: Path = field(
        default=Path("watches.yaml"),
        metadata=setting(
            "--watches-file", parse=Path, help="path to the watches file (default: %(default)s)"
        ),
    )
    kubeconfig: str | None = field(
        default=None,
        metadata=setting(
            "--kubeconfig",
            help="kubeconfig to use (default: KUBECONFIG, ~/.kube/config, in-cluster, "
            "or the local control plane)",
        ),
    )
    impersonate: str | None = field(  # every request acts as this user
        default=None,
        metadata=setting(
            "--as",
            parse=impersonation,
            metavar="USER",
            help="act as this identity, e.g. the deployed operator's "
            "system:serviceaccount:NAMESPACE:NAME, so that a local run meets its RBAC "
            "(your credentials must be allowed to impersonate it)",
        ),
    )
    namespaces: tuple[str, ...] = field(  # empty: all
        default=(),
        metadata=setting(
            env="WATCH_NAMESPACE",
            from_env=lambda environ: tuple(comma_list(environ, "WATCH_NAMESPACE")),
        ),
    )
