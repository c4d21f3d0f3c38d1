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


def namespace_selector(text: str) -> str:
    from ansible_operator.kube.selectors import SelectorError, check_label_selector

    try:
        check_label_selector(text)
    except SelectorError as error:
        raise argparse.ArgumentTypeError(
            f"not a label selector: {text!r}: {error} (e.g. 'team=a,env in (prod)')"
        ) from None
    return text.strip()


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
    namespace_selector: str | None = field(  # the namespaces whose labels match
        default=None,
        metadata=setting(
            "--watch-namespace-selector",
            env="WATCH_NAMESPACE_SELECTOR",
            parse=namespace_selector,
            metavar="SELECTOR",
            help="watch the namespaces whose labels match this selector (e.g. "
            "'team=a,env in (prod)'), following their labels as they change; "
            "not with WATCH_NAMESPACE",
        ),
    )
