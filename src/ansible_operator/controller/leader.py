"""Leader election on a coordination.k8s.io/v1 Lease, as client-go does it.

A candidate takes the Lease when it is free or expired (renewTime +
leaseDurationSeconds in the past), then renews it every retry period. A
leader that cannot renew within the renew deadline gives up: `lost` is set,
and the manager stops at once, so two replicas never reconcile together.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import socket
import uuid
from typing import Any

from ansible_operator.kube.client import ApiClient, ApiError
from ansible_operator.kube.types import Resource

log = logging.getLogger("ansible_operator.leader")

LEASES = Resource(
    group="coordination.k8s.io",
    version="v1",
    kind="Lease",
    plural="leases",
    namespaced=True,
    verbs=frozenset({"create", "get", "update", "patch"}),
)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _format(moment: datetime.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(text: str | None) -> datetime.datetime | None:
    if not text:
        return None
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


class LeaderElector:
    def __init__(
        self,
        api: ApiClient,
        *,
        name: str,
        namespace: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        identity: str | None = None,
    ) -> None:
        self.api = api
        self.name = name
        self.namespace = namespace
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.identity = identity or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
        self.lost = asyncio.Event()
        self._renewer: asyncio.Task[None] | None = None

    async def acquire(self) -> None:
        """Wait until this candidate holds the Lease, then keep renewing it."""
        log.info(
            "waiting for leadership lease=%s/%s identity=%s",
            self.namespace,
            self.name,
            self.identity,
        )
        while True:
            try:
                if await self._try_acquire_or_renew():
                    break
            except (ApiError, OSError) as error:
                log.warning(
                    "lease acquisition failed lease=%s/%s error=%s",
                    self.namespace,
                    self.name,
                    error,
                )
            await asyncio.sleep(self.retry_period)
        log.info("became leader lease=%s/%s identity=%s", self.namespace, self.name, self.identity)
        self._renewer = asyncio.create_task(self._renew_loop(), name="leader-renew")

    async def _renew_loop(self) -> None:
        last_renewed = asyncio.get_running_loop().time()
        while True:
            await asyncio.sleep(self.retry_period)
            try:
                renewed = await asyncio.wait_for(self._try_acquire_or_renew(), self.retry_period)
            except (ApiError, OSError, TimeoutError) as error:
                log.warning(
                    "lease renewal failed lease=%s/%s error=%s", self.namespace, self.name, error
                )
                renewed = False
            now = asyncio.get_running_loop().time()
            if renewed:
                last_renewed = now
            elif now - last_renewed > self.renew_deadline:
                log.error(
                    "leadership lost lease=%s/%s identity=%s",
                    self.namespace,
                    self.name,
                    self.identity,
                )
                self.lost.set()
                return

    async def _try_acquire_or_renew(self) -> bool:
        now = _now()
        try:
            lease = await self.api.get(LEASES, self.name, self.namespace)
        except ApiError as error:
            if error.status != 404:
                raise
            try:
                await self.api.create(LEASES, self._body(now, transitions=0), self.namespace)
            except ApiError as create_error:
                if create_error.status == 409:
                    return False
                raise
            return True
        spec: dict[str, Any] = lease.get("spec") or {}
        holder = spec.get("holderIdentity")
        renewed = _parse(spec.get("renewTime")) or _parse(spec.get("acquireTime"))
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        expired = renewed is None or renewed + datetime.timedelta(seconds=duration) < now
        if holder and holder != self.identity and not expired:
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        body = self._body(now, transitions=transitions + (0 if holder == self.identity else 1))
        if holder == self.identity and spec.get("acquireTime"):
            body["spec"]["acquireTime"] = spec["acquireTime"]
        body["metadata"]["resourceVersion"] = lease["metadata"]["resourceVersion"]
        try:
            await self.api.replace(LEASES, self.name, body, self.namespace)
        except ApiError as error:
            if error.status == 409:
                return False
            raise
        return True

    def _body(self, now: datetime.datetime, *, transitions: int) -> dict[str, Any]:
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": max(1, round(self.lease_duration)),
                "acquireTime": _format(now),
                "renewTime": _format(now),
                "leaseTransitions": transitions,
            },
        }

    async def release(self) -> None:
        """On a clean shutdown, hand the Lease over at once instead of letting it expire."""
        if self._renewer is not None:
            self._renewer.cancel()
        if self.lost.is_set():
            return
        try:
            lease = await self.api.get(LEASES, self.name, self.namespace)
            if (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            lease["spec"]["holderIdentity"] = None
            lease["spec"]["renewTime"] = _format(_now() - datetime.timedelta(days=1))
            await self.api.replace(LEASES, self.name, lease, self.namespace)
        except (ApiError, OSError) as error:
            log.warning("could not release the lease %s/%s: %s", self.namespace, self.name, error)
