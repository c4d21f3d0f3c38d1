"""How Ansible runs: verbosity, paths, extra arguments, what is logged, facts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ansible_operator.settings.declare import setting
from ansible_operator.settings.parsers import optional_path


def facts_skipped(environ: Mapping[str, str]) -> bool:
    """Whether role runs get `--role-skip-facts`; `run` and `reconcile` both ask
    here. As Operator SDK's operator: ANSIBLE_GATHERING=explicit skips facts,
    any other value gathers them. Unset, in a pod it gathers, as the reference
    does (the manifest decides: the scaffolded manager.yaml sets explicit);
    outside a cluster it skips, as that manifest makes the deployed operator
    do, so a local run behaves as deployed and does not spend seconds on facts."""
    gathering = environ.get("ANSIBLE_GATHERING", "").strip().lower()
    if gathering:
        return gathering == "explicit"
    return not environ.get("KUBERNETES_SERVICE_HOST")


def unquoted(ansible_args: str) -> str:
    """`--ansible-args` as a manifest passes it: `args: ["--ansible-args='-e x=1'"]`
    reaches us with the quotes, there being no shell. Operator SDK strips one
    pair of quotes around the whole value; so do we."""
    text = ansible_args.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def debug_logs(environ: Mapping[str, str]) -> bool:
    return environ.get("ANSIBLE_DEBUG_LOGS", "").lower() in ("true", "1", "yes")


@dataclass(frozen=True)
class AnsibleSettings:
    verbosity: int = field(
        default=2,
        metadata=setting(
            "--ansible-verbosity",
            parse=int,
            choices=range(8),
            metavar="0-7",
            help="Ansible verbosity (default: %(default)s)",
        ),
    )
    roles_path: str | None = field(
        default=None,
        metadata=setting(
            "--ansible-roles-path", help="ANSIBLE_ROLES_PATH for runs and role lookup"
        ),
    )
    collections_path: str | None = field(
        default=None,
        metadata=setting(
            "--ansible-collections-path",
            help="ANSIBLE_COLLECTIONS_PATH for runs and role lookup",
        ),
    )
    args: str = field(
        default="",
        metadata=setting(
            "--ansible-args",
            help="extra ansible-playbook arguments, e.g. '--tags x'",
            then=unquoted,
        ),
    )
    log_events: str = field(
        default="tasks",
        metadata=setting(
            "--ansible-log-events",
            choices=("tasks", "everything", "nothing"),
            help="which Ansible events to log (default: %(default)s)",
        ),
    )
    # Ansible's own output in the operator's log.
    debug_logs: bool = field(
        default=False, metadata=setting(env="ANSIBLE_DEBUG_LOGS", from_env=debug_logs)
    )
    inventory: Path | None = field(
        default=None,
        metadata=setting(
            env="ANSIBLE_INVENTORY",
            from_env=lambda environ: optional_path(environ.get("ANSIBLE_INVENTORY")),
        ),
    )
    skip_facts: bool = field(
        default=True, metadata=setting(env="ANSIBLE_GATHERING", from_env=facts_skipped)
    )
    check_mode: bool = False  # `reconcile --check`: --check --diff, nothing written
