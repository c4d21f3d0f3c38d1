"""A conversion role's run: one per ConversionReview (per version's role it needs),
whatever the number of objects, through the warm runner as admission runs go.

The role gets one variable, `conversion`:

    kind, group, hub      the kind's
    version               the version this role converts (to and from the hub)
    from, to              the version of the objects given, the version asked for
    desired_api_version   GROUP/TO, the apiVersion each object returned must have
    objects               the objects, as the API server sent them

It answers with `operator_sdk.util.conversion_response: {objects: [...]}` (the first such
task is the answer). The objects are cluster data: they reach Ansible as data it never
templates, and an object holding Ansible's tagged-value keys or nesting too deep refuses
the review (project/admission.py), as an admission request is. The run may read through
the proxy, never write (a conversion has no side effects, as the API server requires), and
has `BUDGET` seconds to answer (the API server gives a conversion webhook 30): past it
the review is refused and the run killed in the background.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from ansible_operator.conversion.converter import ConversionFailed
from ansible_operator.conversion.kinds import KindConversion, VersionConversion
from ansible_operator.kube.types import Owner
from ansible_operator.project import admission
from ansible_operator.project.reserved_vars import RefusedData
from ansible_operator.runner import priority
from ansible_operator.runner.host import RunnerHost
from ansible_operator.runner.plan import RunPlan, new_ident
from ansible_operator.settings import Settings
from ansible_operator.webhooks.admission_limits import FairSlots

log = logging.getLogger("ansible_operator.webhooks")

BUDGET = 25.0  # seconds to answer, of the API server's 30
KILL_AFTER = 30.0  # a backstop for the run itself; the answer never waits for it
ANSWER_ACTIONS = frozenset({"conversion_response", "operator_sdk.util.conversion_response"})
ANSWER_EVENTS = frozenset({"runner_on_ok", "runner_item_on_ok"})


def objects_from_event(event: dict[str, Any]) -> list[Any] | None:
    """The objects a `conversion_response` task's event carries, if it is one."""
    if event.get("event") not in ANSWER_EVENTS:
        return None
    data = event.get("event_data") or {}
    if data.get("task_action") not in ANSWER_ACTIONS:
        return None
    result = data.get("res")
    answer = result.get("conversion_response") if isinstance(result, dict) else None
    objects = answer.get("objects") if isinstance(answer, dict) else None
    return objects if isinstance(objects, list) else None


class ConversionRunner:
    def __init__(self, *, settings: Settings, host: RunnerHost, slots: FairSlots) -> None:
        self.settings = settings
        self.host = host
        self.slots = slots
        self._background: set[asyncio.Future[Any]] = set()

    async def run(
        self,
        declared: KindConversion,
        entry: VersionConversion,
        objects: list[dict[str, Any]],
        target: str,
        peer: str,
    ) -> list[Any]:
        """`objects` converted to `target` by `entry`'s role; ConversionFailed naming the
        entry when the run cannot give them; SlotsBusy (nothing started) when `peer`
        already waits for as many runs as may wait."""
        assert entry.role is not None
        source = objects[0].get("apiVersion", "").rpartition("/")[2] if objects else ""
        from_cluster = {
            "conversion": {
                "kind": declared.kind,
                "group": declared.group,
                "hub": declared.hub,
                "version": entry.version,
                "from": source,
                "to": target,
                "desired_api_version": declared.api_version(target),
                "objects": objects,
            },
            "ansible_operator_meta": {"name": "", "namespace": ""},
        }
        try:
            variables = await asyncio.to_thread(admission.admit_data, from_cluster, entry.role.vars)
        except RefusedData as refused:
            raise ConversionFailed(
                f"{entry.describe()}: the objects may not reach Ansible: "
                + "; ".join(str(each) for each in refused.refusals)
            ) from None
        except RecursionError:
            raise ConversionFailed(
                f"{entry.describe()}: the objects nest too deep for Ansible"
            ) from None
        plan = RunPlan(
            ident=new_ident(),
            owner=Owner(declared.group, target, declared.kind, "", f"{len(objects)}-objects", ""),
            described=(
                f"conversion kind={declared.kind}.{declared.group} from={source} to={target} "
                f"objects={len(objects)}"
            ),
            subject=Path("conversions", f"{declared.kind.lower()}.{declared.group}", entry.version),
            role=entry.role.role,
            playbook=entry.role.playbook,
            extravars=variables.author,
            cluster_vars=variables.cluster,
            verbosity=self.settings.ansible.verbosity,
            timeout=BUDGET + KILL_AFTER,
            keep_artifacts=entry.role.max_runner_artifacts,
            shares_subject=True,
            skip_facts=True,
            ansible_args=self.settings.ansible.args,
            writes=False,
            owns=False,
            nice=priority.ADMISSION,
            capped=False,
        )
        answer: list[list[Any]] = []

        def hear(event: dict[str, Any]) -> None:
            if not answer:
                found = objects_from_event(event)
                if found is not None:
                    answer.append(found)

        ticket = self.slots.reserve(peer)

        async def run_in_slot() -> Any:
            async with ticket:
                return await self.host.run(plan, on_event=hear)

        task = asyncio.ensure_future(run_in_slot())
        task.add_done_callback(lambda _: ticket.close())
        try:
            done, _ = await asyncio.wait({task}, timeout=BUDGET)
        except asyncio.CancelledError:
            self._stop_in_background(task)
            raise
        if task not in done:
            self._stop_in_background(task)
            raise ConversionFailed(
                f"{entry.describe()}: the role did not answer within {BUDGET:g}s; the run "
                f"was stopped (run {plan.ident})"
            )
        result = task.result()
        if not result.succeeded:
            raise ConversionFailed(
                f"{entry.describe()}: the role failed: {result.message} (run {plan.ident})"
            )
        if not answer:
            raise ConversionFailed(
                f"{entry.describe()}: the role ended without an answer (no "
                f"operator_sdk.util.conversion_response task ran; run {plan.ident})"
            )
        return answer[0]

    def _stop_in_background(self, task: asyncio.Future[Any]) -> None:
        task.cancel()
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def stop(self) -> None:
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
