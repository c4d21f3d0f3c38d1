"""The Ansible reconciler: one object of a watch, reconciled once (the
reference's flow, with its weaknesses fixed). The generic controller
(controller.py) calls it with a key and follows the `Outcome` it returns.

    read the object (ObjectReader) -> gone? forget it -> annotations valid? ->
    finalizer handling -> Running -> Ansible run (runner.run) -> finalizer
    removal -> Successful / Failure (+ observedGeneration, Events) -> Outcome
    (requeue_after, the reconcile period, or retry with backoff)
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ansible_operator.controller.finalizers import add_finalizer, has_finalizer, remove_finalizer
from ansible_operator.controller.reconcile import ObjectKey, ObjectReader, Outcome
from ansible_operator.kube.api import Api
from ansible_operator.kube.client import ApiError
from ansible_operator.kube.types import Owner, Resource
from ansible_operator.observability.metrics import Metrics
from ansible_operator.project.admission import RunVariables
from ansible_operator.project.reserved_vars import RefusedData
from ansible_operator.project.watch_admission import WatchAdmission
from ansible_operator.project.watches import Watch
from ansible_operator.reconciler import conditions
from ansible_operator.reconciler.annotations import AnnotationError, object_settings
from ansible_operator.reconciler.events import record_event
from ansible_operator.reconciler.role_conditions import conditions_named
from ansible_operator.reconciler.status import ObjectGone, write_conditions
from ansible_operator.runner.plan import new_ident
from ansible_operator.runner.rbac_refusal import RbacRefusal, describe_all
from ansible_operator.runner.result import RunResult
from ansible_operator.runner.run import Runner, object_fields, owner_of, plan_for
from ansible_operator.settings import Settings
from ansible_operator.settings.precedence import effective

log = logging.getLogger("ansible_operator.controller")


class WouldWrite(Protocol):
    """Told, in place of the write, what a reconcile that leaves its object alone
    would have written to it (`reconcile` without --write-status)."""

    def __call__(self, what: str, detail: Any) -> None: ...


class RefusedWatches(Protocol):
    """The dependent watches (manager/dependents.py), as a reconcile asks them."""

    def refused_watches(self, owner: Owner) -> list[RbacRefusal]:
        """What RBAC refuses of the watches of the kinds `owner`'s runs wrote."""


@dataclass
class Shared:
    """What every watch's reconciler shares."""

    api: Api
    settings: Settings
    metrics: Metrics
    runner: Runner  # does the Ansible runs (runner/host.py's RunnerHost)
    admission: WatchAdmission  # what of an object may reach its run, and how
    dependents: RefusedWatches | None = None  # None: no dependent watches (`reconcile`)
    # Set: the object's status, finalizers and Events are left alone, and this
    # hears what would have been written instead (`reconcile` without --write-status).
    would_write: WouldWrite | None = None


class AnsibleReconciler:
    """Reconciles the objects of one watch by running its role or playbook."""

    def __init__(self, watch: Watch, resource: Resource, reader: ObjectReader, shared: Shared):
        self.watch = watch
        self.resource = resource
        self.reader = reader
        self.shared = shared
        self.gvk_label = f"{watch.gvk.group or 'core'}/{watch.gvk.version}/{watch.gvk.kind}"
        self._warned: dict[ObjectKey, tuple[str, ...]] = {}  # annotation warnings already sent
        # The kstatus conditions this watch's role sets itself: left to it (conditions.py).
        self._role_owned: set[str] = set(conditions_named(*watch.target(deleting=False)))

    @property
    def writes_status(self) -> bool:
        """Our conditions go to the object (or, left alone, to `would_write`)."""
        if self.shared.would_write is not None:
            return self.watch.manage_status
        return self.watch.manage_status and not self.dry_run

    @property
    def dry_run(self) -> bool:
        """Nothing written to the object: check mode (`reconcile --check`: Ansible in
        check mode), or a local run told to leave it alone (`would_write`)."""
        return self.shared.settings.ansible.check_mode or self.shared.would_write is not None

    def _would(self, what: str, detail: Any) -> None:
        if self.shared.would_write is not None:
            self.shared.would_write(what, detail)

    # ----- one reconcile -----------------------------------------------------
    async def reconcile(self, key: ObjectKey) -> Outcome:
        cached = self.reader.get(key.namespace or None, key.name)
        if cached is None:
            self._forget(key)
            return Outcome()
        deleting = bool(cached["metadata"].get("deletionTimestamp"))
        finalizer = self.watch.finalizer
        if deleting and (finalizer is None or not has_finalizer(cached, finalizer.name)):
            return Outcome()

        # Before the copy (data nested too deep breaks copy.deepcopy) and before any
        # write: a refused object gets no finalizer (a role that never ran has nothing to
        # clean up) and never shows Running.
        variables = await self._admit(cached, deleting)
        if variables is None:
            return Outcome(retry=False)

        obj = copy.deepcopy(cached)
        self._record_created(obj)

        try:
            annotated = object_settings(obj, most_artifacts=self.watch.max_runner_artifacts)
        except AnnotationError as error:
            await self._fail(obj, str(error), reason="InvalidAnnotation", stalled=True)
            return Outcome(retry=True)
        if self._warned.get(key, ()) != annotated.warnings:
            # Once per object and distinct warning: reconciles may come every second.
            # Only objects with warnings hold an entry (thousands of objects have none).
            if annotated.warnings:
                self._warned[key] = annotated.warnings
            else:
                del self._warned[key]
            for warning in annotated.warnings:
                await self._event(obj, "AnnotationAdjusted", warning, warning=True)
        settings = self.shared.settings
        # Annotation over watch over flag, resolved once for the run and the requeue.
        resolved = effective(self.watch, settings.runs, settings.ansible, annotated)

        if not deleting and finalizer is not None and not has_finalizer(obj, finalizer.name):
            self._would("finalizer added", finalizer.name)
        if (
            not deleting
            and not self.dry_run
            and finalizer is not None
            and not has_finalizer(obj, finalizer.name)
        ):
            updated = await add_finalizer(self.shared.api, self.resource, obj, finalizer.name)
            if updated is None:
                return Outcome()
            obj = updated
            # The run's object is the one with the finalizer.
            variables = await self._admit(obj, deleting)
            if variables is None:
                return Outcome(retry=False)

        before = obj.get("status")
        ours: dict[str, tuple[str, str, str]] = {}
        if self.writes_status:
            starting = conditions.running(before, generation_of(obj))
            ours = {entry.type: conditions.content(entry.to_dict("")) for entry in starting}
            try:
                # observedGeneration waits for the outcome: it says which
                # generation the Successful/Failure conditions describe.
                await self._write_status(obj, starting, observe=False, known=obj)
            except ObjectGone:
                return Outcome()

        try:
            plan = plan_for(
                self.watch,
                obj,
                variables,
                settings,
                resolved,
                deleting=deleting,
                ident=new_ident(),
            )
            result = await self.shared.runner.run(plan)
        except asyncio.CancelledError:
            # Shutdown killed the run: say so, rather than leave the object Running.
            await asyncio.shield(self._interrupted(obj))
            raise

        self._learn_role_owned(obj, before, ours, result)
        for coerced in result.coerced:
            await self._event(obj, "StringFieldCoerced", coerced, warning=True)
        if deleting and finalizer is not None and result.succeeded and self.dry_run:
            self._would("finalizer removed", finalizer.name)
        if deleting and finalizer is not None and result.succeeded and not self.dry_run:
            log.info(
                "finalizer run succeeded, removing finalizer %s %s",
                finalizer.name,
                object_fields(obj),
            )
            remaining = await remove_finalizer(self.shared.api, self.resource, obj, finalizer.name)
            if remaining is None or not (remaining.get("metadata") or {}).get("deletionTimestamp"):
                return Outcome(run=result)
            obj = remaining

        return await self._report(obj, result, resolved.reconcile_period)

    async def _admit(self, obj: dict[str, Any], deleting: bool) -> RunVariables | None:
        """The run's variables, or None once a refusal is reported (a Failure and an
        Event naming each key): project/admission.py."""
        try:
            return await self.shared.admission.admit(self.watch, obj, deleting=deleting)
        except RefusedData as refused:
            # Not run, and no retry mends it: only a change of the object.
            await self._fail(obj, f"not run: {refused}", reason=refused.reason, stalled=True)
            return None

    # ----- reporting ---------------------------------------------------------
    async def _report(
        self, obj: dict[str, Any], result: RunResult, reconcile_period: float
    ) -> Outcome:
        stats = result.stats
        ansible_result = (
            conditions.AnsibleResult(
                ok=stats.ok,
                changed=stats.changed,
                skipped=stats.skipped,
                failures=stats.failures,
                completion=conditions.now_rfc3339(),
            )
            if stats is not None
            else None
        )
        previously_failed = conditions.is_true(obj.get("status"), conditions.FAILURE)
        self.shared.metrics.reconcile_result.labels(
            self.gvk_label, "succeeded" if result.succeeded else "failed"
        ).inc()
        if result.succeeded:
            watched = self._dependents_watched(obj)
            if self.writes_status:
                assert ansible_result is not None
                with contextlib.suppress(ObjectGone):
                    await self._write_status(
                        obj, conditions.succeeded(ansible_result, generation_of(obj)) + watched
                    )
            if watched and watched[0].status == "False":
                await self._event(obj, "DependentWatchForbidden", watched[0].message, warning=True)
            if previously_failed:
                await self._event(
                    obj, "ReconcileSucceeded", "Reconciliation succeeded after earlier failures"
                )
            if result.requeue_after is not None:  # the role's requeue_after wins
                return Outcome(requeue_after=result.requeue_after, run=result)
            return Outcome(requeue_after=reconcile_period, periodic=True, run=result)
        await self._fail(
            obj,
            result.message,
            ansible_result=ansible_result,
            reason="RunTimeout" if result.status == "timeout" else "Failed",
        )
        if result.requeue_after is not None:
            return Outcome(requeue_after=result.requeue_after, run=result)
        return Outcome(retry=True, run=result)

    def _learn_role_owned(
        self,
        obj: Mapping[str, Any],
        before: Mapping[str, Any] | None,
        ours: Mapping[str, tuple[str, str, str]],
        result: RunResult,
    ) -> None:
        learned = conditions.role_owned(before, ours, result.owner_conditions) - self._role_owned
        if learned:
            self._role_owned |= learned
            log.info(
                "the role sets %s itself; the operator leaves it to the role %s",
                ", ".join(sorted(learned)),
                object_fields(obj),
            )

    def _dependents_watched(self, obj: dict[str, Any]) -> list[conditions.Condition]:
        """`DependentsWatched` False while RBAC refuses to watch a kind this
        object's runs made (their drift would go unseen); True once it no
        longer does; nothing for an object that never had it."""
        dependents = self.shared.dependents
        refused = dependents.refused_watches(owner_of(self.watch, obj)) if dependents else []
        if refused:
            message = (
                f"the operator cannot watch what this object's runs made, so a change to them "
                f"goes unseen: {describe_all(refused)}"
            )
            return [conditions.dependents_watched(message)]
        if conditions.condition(obj.get("status"), conditions.DEPENDENTS_WATCHED) is not None:
            return [conditions.dependents_watched(None)]
        return []

    async def _fail(
        self,
        obj: dict[str, Any],
        message: str,
        *,
        reason: str,
        ansible_result: conditions.AnsibleResult | None = None,
        stalled: bool = False,
    ) -> None:
        log.error("reconcile failed %s reason=%s message=%r", object_fields(obj), reason, message)
        if self.writes_status:
            failure = conditions.failed(
                message, ansible_result, reason, generation=generation_of(obj), stalled=stalled
            )
            with contextlib.suppress(ObjectGone):
                await self._write_status(obj, failure)
        await self._event(obj, reason, message, warning=True)

    async def _event(
        self, obj: dict[str, Any], reason: str, message: str, *, warning: bool = False
    ) -> None:
        self._would("Event", (("Warning" if warning else "Normal"), reason, message))
        if not self.dry_run:
            await record_event(self.shared.api, obj, reason, message, warning=warning)

    async def _interrupted(self, obj: dict[str, Any]) -> None:
        message = "the operator stopped during this run; it runs again when the operator starts"
        log.warning("run interrupted %s", object_fields(obj))
        if self.writes_status:
            with contextlib.suppress(ObjectGone, ApiError, OSError):
                await asyncio.wait_for(
                    self._write_status(
                        obj,
                        conditions.failed(
                            message, None, "Interrupted", generation=generation_of(obj)
                        ),
                    ),
                    10,
                )

    async def _write_status(
        self,
        obj: dict[str, Any],
        updates: list[conditions.Condition],
        *,
        observe: bool = True,
        known: Mapping[str, Any] | None = None,
    ) -> None:
        """`known`: the object as last seen, else the cache's (the role's writes through the
        proxy are in it): tried before a read (status.py)."""
        metadata = obj["metadata"]
        updates = [entry for entry in updates if entry.type not in self._role_owned]
        if self.shared.would_write is not None and self.watch.manage_status:
            self._would("status", updates)
            return
        namespace = metadata.get("namespace")
        await write_conditions(
            self.shared.api,
            self.resource,
            namespace,
            metadata["name"],
            updates,
            observed_generation=metadata.get("generation") if observe else None,
            known=known or self.reader.get(namespace or None, metadata["name"]),
        )

    def _forget(self, key: ObjectKey) -> None:
        """The object is gone: its metric series and remembered warnings go with it."""
        self._warned.pop(key, None)
        gvk = self.watch.gvk
        self.shared.metrics.forget_object(key.name, key.namespace, gvk.group, gvk.version, gvk.kind)

    def forget_namespace(self, namespace: str) -> None:
        """`namespace` left the watched ones: what is kept per object there goes."""
        for key in [key for key in self._warned if key.namespace == namespace]:
            del self._warned[key]
        gvk = self.watch.gvk
        self.shared.metrics.forget_namespace(namespace, gvk.group, gvk.version, gvk.kind)

    def _record_created(self, obj: dict[str, Any]) -> None:
        metadata = obj.get("metadata") or {}
        created = metadata.get("creationTimestamp")
        if not created:
            return
        with contextlib.suppress(ValueError):
            timestamp = datetime.datetime.fromisoformat(created.replace("Z", "+00:00"))
            self.shared.metrics.resource_created_at.labels(
                metadata.get("name", ""),
                metadata.get("namespace", ""),
                self.watch.gvk.group,
                self.watch.gvk.version,
                self.watch.gvk.kind,
            ).set(timestamp.timestamp())


def generation_of(obj: Mapping[str, Any]) -> int | None:
    """What the kstatus conditions describe (conditions.py): the object's generation."""
    generation = (obj.get("metadata") or {}).get("generation")
    return generation if isinstance(generation, int) else None
