"""The run a reconcile asks for: one object of a watch, as a RunPlan.

    controller --plan_for(watch, obj, ...)--> RunPlan --Runner.run--> RunResult

The plan says what to play (the watch's role or playbook, a finalizer's own),
with what (the object's extra vars, verbosity, timeout, check mode), where
(the object's run directory) and how many artifacts stay. `Runner` is what the
controller calls: runner/host.py's RunnerHost, or runner/fake.py in tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from ansible_operator.kube.types import Owner
from ansible_operator.project.admission import RunVariables
from ansible_operator.project.watches import Watch
from ansible_operator.runner import rundir
from ansible_operator.runner.plan import RunPlan
from ansible_operator.runner.result import RunResult
from ansible_operator.settings import Settings
from ansible_operator.settings.precedence import Effective


class Runner(Protocol):
    async def run(self, plan: RunPlan) -> RunResult: ...


def object_fields(obj: Mapping[str, Any]) -> str:
    """An object as log lines name it."""
    metadata = obj.get("metadata") or {}
    return (
        f"kind={obj.get('kind')} namespace={metadata.get('namespace') or ''} "
        f"name={metadata.get('name')}"
    )


def gvk_label(watch: Watch) -> str:
    return f"{watch.gvk.group or 'core'}/{watch.gvk.version}/{watch.gvk.kind}"


def owner_of(watch: Watch, obj: Mapping[str, Any]) -> Owner:
    metadata = obj["metadata"]
    return Owner(
        group=watch.gvk.group,
        version=watch.gvk.version,
        kind=watch.gvk.kind,
        namespace=metadata.get("namespace") or "",
        name=metadata["name"],
        uid=metadata.get("uid", ""),
    )


def plan_for(
    watch: Watch,
    obj: Mapping[str, Any],
    variables: RunVariables,
    settings: Settings,
    resolved: Effective,
    *,
    deleting: bool = False,
    ident: str,
) -> RunPlan:
    """The run of `obj` (as the controller last wrote it) with `variables`, what
    admission made of it: its finalizer run when `deleting`; `resolved` are the
    object's settings, resolved (settings/precedence.py)."""
    owner = owner_of(watch, obj)
    role, playbook = watch.target(deleting=deleting)
    ansible_args = settings.ansible.args
    if settings.ansible.check_mode:
        ansible_args = f"{ansible_args} --check --diff".strip()
    gvk = watch.gvk
    return RunPlan(
        ident=ident,
        owner=owner,
        described=object_fields(obj),
        subject=rundir.object_dir(
            Path(), gvk.group, gvk.version, gvk.kind, owner.namespace, owner.name
        ),
        role=role,
        playbook=playbook,
        extravars=variables.author,
        cluster_vars=variables.cluster,
        verbosity=resolved.verbosity,
        timeout=resolved.run_timeout,
        keep_artifacts=resolved.keep_artifacts,
        skip_facts=settings.ansible.skip_facts,
        ansible_args=ansible_args,
        nice=settings.runs.reconcile_run_nice,
        label=gvk_label(watch),
        dry_run=settings.ansible.check_mode,
    )
