"""One watch's controller: its work queue, its workers and the reconcile of one
object (the reference's flow, with its weaknesses fixed).

    get object from the cache -> annotations valid? -> finalizer handling ->
    Running -> Ansible run -> finalizer removal -> Successful / Failure
    (+ observedGeneration, Events) -> requeue (requeue_after, period, backoff)
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ansible_operator import params
from ansible_operator.controller import conditions
from ansible_operator.controller.annotations import AnnotationError, object_settings
from ansible_operator.controller.events import record_event
from ansible_operator.controller.finalizers import add_finalizer, has_finalizer, remove_finalizer
from ansible_operator.controller.predicates import primary_update_matters
from ansible_operator.controller.queue import ShutDown, WorkQueue
from ansible_operator.controller.status import ObjectGone, write_conditions
from ansible_operator.kube.client import ApiClient, ApiError
from ansible_operator.kube.types import Resource
from ansible_operator.metrics import Metrics
from ansible_operator.options import OperatorOptions
from ansible_operator.runner.process import RunResult
from ansible_operator.runner.run import Runner, RunRequest, object_fields
from ansible_operator.watches import Watch

log = logging.getLogger("ansible_operator.controller")


@dataclass(frozen=True, order=True)
class ObjectKey:
    namespace: str
    name: str


class ObjectReader(Protocol):
    """Where a controller reads the objects it reconciles: its informer's
    cache, or the one object of `ansible-operator reconcile`."""

    def get(self, namespace: str | None, name: str) -> dict[str, Any] | None: ...


@dataclass
class Shared:
    """What every watch's controller shares."""

    api: ApiClient
    options: OperatorOptions
    metrics: Metrics
    runner: Runner  # does the Ansible runs (runner/run.py)


@dataclass
class Outcome:
    """What a reconcile asks of the queue."""

    requeue_after: float | None = None
    retry: bool = False  # back off and try again
    notes: list[str] = field(default_factory=list)


class WatchController:
    def __init__(self, watch: Watch, resource: Resource, informer: ObjectReader, shared: Shared):
        self.watch = watch
        self.resource = resource
        self.informer = informer
        self.shared = shared
        self.gvk_label = f"{watch.gvk.group or 'core'}/{watch.gvk.version}/{watch.gvk.kind}"
        self.queue: WorkQueue[ObjectKey] = WorkQueue(self.gvk_label)
        self.workers = watch.max_concurrent_reconciles or shared.options.max_concurrent_reconciles
        self._tasks: list[asyncio.Task[None]] = []
        self._in_flight: set[ObjectKey] = set()
        self._warned: dict[ObjectKey, tuple[str, ...]] = {}  # annotation warnings already sent

    @property
    def writes_status(self) -> bool:
        return self.watch.manage_status and not self.shared.options.check_mode

    @property
    def dry_run(self) -> bool:
        """Check mode (`reconcile --check`): Ansible in check mode, and we write nothing."""
        return self.shared.options.check_mode

    # ----- events -> queue ---------------------------------------------------
    def on_event(self, kind: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        obj = new if new is not None else old
        if obj is None:
            return
        metadata = obj.get("metadata") or {}
        key = ObjectKey(metadata.get("namespace") or "", metadata["name"])
        if kind == "DELETED":
            self.queue.forget(key)
            self._warned.pop(key, None)
            self._forget_metrics(obj)
            return
        if kind == "MODIFIED" and not primary_update_matters(
            old, obj, watch_annotations=self.watch.watch_annotations_changes
        ):
            return
        self.enqueue(key)

    def enqueue(self, key: ObjectKey) -> None:
        self.queue.add(key)
        self.shared.metrics.queue_depth.labels(self.gvk_label).set(len(self.queue))

    # ----- workers -----------------------------------------------------------
    def start(self) -> None:
        for number in range(self.workers):
            self._tasks.append(
                asyncio.create_task(self._worker(), name=f"{self.gvk_label}#{number}")
            )

    async def _worker(self) -> None:
        while True:
            try:
                key = await self.queue.get()
            except ShutDown:
                return
            self.shared.metrics.queue_depth.labels(self.gvk_label).set(len(self.queue))
            self._in_flight.add(key)
            try:
                outcome = await self._reconcile_safely(key)
            finally:
                self._in_flight.discard(key)
            if outcome.retry:
                delay = self.queue.add_rate_limited(key)
                log.info(
                    "retrying with backoff kind=%s namespace=%s name=%s delay=%.1fs",
                    self.watch.gvk.kind,
                    key.namespace,
                    key.name,
                    delay,
                )
            else:
                self.queue.forget(key)
                if outcome.requeue_after is not None and outcome.requeue_after > 0:
                    self.queue.add_after(key, outcome.requeue_after)
            self.queue.done(key)

    async def stop(self, grace: float) -> None:
        """Stop taking work; let runs finish for `grace` seconds, then kill them."""
        await self.queue.shutdown()
        if not self._tasks:
            return
        _done, pending = await asyncio.wait(self._tasks, timeout=grace)
        for task in pending:
            task.cancel()
        for task in pending:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # ----- one reconcile -----------------------------------------------------
    async def _reconcile_safely(self, key: ObjectKey) -> Outcome:
        started = time.monotonic()
        try:
            return await self.reconcile(key)
        except ApiError as error:
            log.warning(
                "reconcile hit an API error kind=%s namespace=%s name=%s error=%s",
                self.watch.gvk.kind,
                key.namespace,
                key.name,
                error,
            )
            return Outcome(retry=True)
        except Exception:
            log.exception(
                "reconcile crashed kind=%s namespace=%s name=%s",
                self.watch.gvk.kind,
                key.namespace,
                key.name,
            )
            return Outcome(retry=True)
        finally:
            self.shared.metrics.reconciles.labels(self.gvk_label).observe(
                time.monotonic() - started
            )

    async def reconcile(self, key: ObjectKey) -> Outcome:
        cached = self.informer.get(key.namespace or None, key.name)
        if cached is None:
            self._forget_metrics({"metadata": {"name": key.name, "namespace": key.namespace}})
            return Outcome()
        obj = copy.deepcopy(cached)
        metadata = obj["metadata"]
        deleting = bool(metadata.get("deletionTimestamp"))
        finalizer = self.watch.finalizer
        self._record_created(obj)

        if deleting and (finalizer is None or not has_finalizer(obj, finalizer.name)):
            return Outcome()

        try:
            settings = object_settings(obj)
        except AnnotationError as error:
            await self._fail(obj, str(error), reason="InvalidAnnotation")
            return Outcome(retry=True)
        if self._warned.get(key) != settings.warnings:
            # Once per object and distinct warning: reconciles may come every second.
            self._warned[key] = settings.warnings
            for warning in settings.warnings:
                await self._event(obj, "AnnotationAdjusted", warning, warning=True)

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

        spec = obj.get("spec")
        collisions = (
            params.snake_case_collisions(spec)
            if (self.watch.snake_case_parameters and isinstance(spec, Mapping))
            else []
        )
        if collisions:
            described = "; ".join(f"{path}: '{a}' and '{b}'" for path, a, b in collisions)
            await self._fail(
                obj,
                f"spec keys collide after snake_case conversion ({described}); rename one, "
                "or set snakeCaseParameters: false in watches.yaml",
                reason="InvalidSpec",
            )
            return Outcome(retry=False)

        if self.writes_status:
            try:
                # observedGeneration waits for the outcome: it says which
                # generation the Successful/Failure conditions describe.
                await self._write_status(obj, conditions.running(obj.get("status")), observe=False)
            except ObjectGone:
                return Outcome()

        try:
            result = await self.shared.runner.run(
                RunRequest(
                    watch=self.watch,
                    obj=obj,
                    deleting=deleting,
                    verbosity=settings.verbosity,
                    keep_artifacts=settings.max_runner_artifacts,
                )
            )
        except asyncio.CancelledError:
            # Shutdown killed the run: say so, rather than leave the object Running.
            await asyncio.shield(self._interrupted(obj))
            raise

        if deleting and finalizer is not None and result.succeeded and not self.dry_run:
            log.info(
                "finalizer run succeeded, removing finalizer %s %s",
                finalizer.name,
                object_fields(obj),
            )
            remaining = await remove_finalizer(self.shared.api, self.resource, obj, finalizer.name)
            if remaining is None or not (remaining.get("metadata") or {}).get("deletionTimestamp"):
                return Outcome()
            obj = remaining

        return await self._report(obj, result, settings.reconcile_period)

    # ----- reporting ---------------------------------------------------------
    async def _report(
        self, obj: dict[str, Any], result: RunResult, period_override: float | None
    ) -> Outcome:
        stats = result.summary.stats
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
            if self.writes_status:
                assert ansible_result is not None
                with contextlib.suppress(ObjectGone):
                    await self._write_status(obj, conditions.succeeded(ansible_result))
            if previously_failed:
                await self._event(
                    obj, "ReconcileSucceeded", "Reconciliation succeeded after earlier failures"
                )
            period = result.summary.requeue_after
            if period is None:
                period = period_override
            if period is None:
                period = self.watch.reconcile_period or self.shared.options.reconcile_period
            return Outcome(requeue_after=period)
        await self._fail(
            obj,
            result.message,
            ansible_result=ansible_result,
            reason="RunTimeout" if result.status == "timeout" else "Failed",
        )
        if result.summary.requeue_after is not None:
            return Outcome(requeue_after=result.summary.requeue_after)
        return Outcome(retry=True)

    async def _fail(
        self,
        obj: dict[str, Any],
        message: str,
        *,
        reason: str,
        ansible_result: conditions.AnsibleResult | None = None,
    ) -> None:
        log.error("reconcile failed %s reason=%s message=%r", object_fields(obj), reason, message)
        if self.writes_status:
            with contextlib.suppress(ObjectGone):
                await self._write_status(
                    obj, conditions.failed(message, ansible_result, reason=reason)
                )
        await self._event(obj, reason, message, warning=True)

    async def _event(
        self, obj: dict[str, Any], reason: str, message: str, *, warning: bool = False
    ) -> None:
        if not self.dry_run:
            await record_event(self.shared.api, obj, reason, message, warning=warning)

    async def _interrupted(self, obj: dict[str, Any]) -> None:
        message = "the operator stopped during this run; it runs again when the operator starts"
        log.warning("run interrupted %s", object_fields(obj))
        if self.writes_status:
            with contextlib.suppress(ObjectGone, ApiError, OSError):
                await asyncio.wait_for(
                    self._write_status(obj, conditions.failed(message, None, reason="Interrupted")),
                    10,
                )

    async def _write_status(
        self, obj: dict[str, Any], updates: list[conditions.Condition], *, observe: bool = True
    ) -> None:
        metadata = obj["metadata"]
        await write_conditions(
            self.shared.api,
            self.resource,
            metadata.get("namespace"),
            metadata["name"],
            updates,
            observed_generation=metadata.get("generation") if observe else None,
        )

    def _forget_metrics(self, obj: dict[str, Any]) -> None:
        """A deleted object's series go with it."""
        metadata = obj.get("metadata") or {}
        name, namespace = metadata.get("name", ""), metadata.get("namespace", "")
        gvk = self.watch.gvk
        self.shared.metrics.forget_object(name, namespace, gvk.group, gvk.version, gvk.kind)

    def _record_created(self, obj: dict[str, Any]) -> None:
        metadata = obj.get("metadata") or {}
        created = metadata.get("creationTimestamp")
        if not created:
            return
        import datetime

        with contextlib.suppress(ValueError):
            timestamp = datetime.datetime.fromisoformat(created.replace("Z", "+00:00"))
            self.shared.metrics.resource_created_at.labels(
                metadata.get("name", ""),
                metadata.get("namespace", ""),
                self.watch.gvk.group,
                self.watch.gvk.version,
                self.watch.gvk.kind,
            ).set(timestamp.timestamp())
