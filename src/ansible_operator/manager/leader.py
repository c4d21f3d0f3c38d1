"""Leader election on a coordination.k8s.io/v1 Lease, as client-go does it.

A candidate takes the Lease when it is free or expired, then renews it every
retry period. A leader that cannot renew within the renew deadline gives up:
`lost` is set, and the manager stops at once, so two replicas never reconcile
together.

Anyone allowed to write the Lease can put anything in it, so what is read is
checked before it is used (`read_record`): holderIdentity a string,
leaseDurationSeconds an integer from 1 to an hour (or our own duration, if
longer), acquireTime and renewTime RFC 3339 times with a zone and at most one
lease duration in the future. A Lease that fails a check is "malformed", and
the check names the field and the value.

- The leader gives up at once (`lost`, one error line with the reason) when
  the Lease is malformed, was deleted, or names another holder, whether or
  not that holder's lease has expired: client-go's leader, too, is no longer
  leader the moment the record names someone else. Any other failure of the
  renewer ends the same way: it never dies silently.
- A standby never crashes on what it reads; it logs a malformed Lease once
  and keeps retrying. As client-go does, it judges expiry by its own clock: a
  Lease whose record has not changed for a lease duration, observed by this
  process, is expired whatever its renewTime says. A valid renewTime older
  than a lease duration ends it sooner (a restart after a crash need not
  wait). So a Lease with a far-future renewTime, or otherwise malformed, is
  taken over after our own lease duration of seeing it unchanged, instead of
  blocking every replica forever; a holder that keeps renewing keeps it.
- A standby watches its Lease (as the shard ring watches its own): each change
  is timed as it happens and wakes it, so a Lease a leader released on a clean
  exit is taken at once rather than at the next retry period, and a dead
  leader's is taken the moment it expires (the next try is due then, not at
  the next retry period after). Without `watch` on Leases (an older Role),
  it polls every retry period as before, after one line saying so.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import logging
import os
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ansible_operator.kube.api import Api
from ansible_operator.kube.client import ApiError
from ansible_operator.kube.lease_thread import LEASES

log = logging.getLogger("ansible_operator.leader")


MAX_LEASE_SECONDS = 3600
EXPIRY_MARGIN = 0.05  # seconds after an expiry a standby tries, so it finds it expired
WATCH_BACKOFF_MAX = 10.0
INT32_MAX = 2**31 - 1
SHOWN_VALUE_CHARS = 100


class MalformedLease(ValueError):
    """A field of the Lease holds something leader election cannot trust."""

    def __init__(self, field: str, value: object, problem: str) -> None:
        self.field = field
        self.value = value
        self.problem = problem
        super().__init__(f"field={field} value={_shown(value)} problem={problem}")


class LeadershipLost(Exception):
    """The leader must stop reconciling; the message says why."""


@dataclass(frozen=True)
class LeaseRecord:
    """The checked spec of a Lease."""

    holder: str  # "" when nobody holds it
    renewed: datetime.datetime | None
    duration: float


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _format(moment: datetime.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _shown(value: object) -> str:
    """The value for a log line: repr escapes line breaks, the cut bounds the line."""
    text = repr(value)
    if len(text) > SHOWN_VALUE_CHARS:
        return text[:SHOWN_VALUE_CHARS] + f"...({len(text)} chars)"
    return text


def _read_time(
    spec: Mapping[str, Any], field: str, *, now: datetime.datetime, duration: float
) -> datetime.datetime | None:
    value = spec.get(field)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise MalformedLease(field, value, "not a string")
    try:
        moment = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise MalformedLease(field, value, "not an RFC 3339 time") from None
    if moment.tzinfo is None:
        raise MalformedLease(field, value, "has no time zone")
    if moment > now + datetime.timedelta(seconds=duration):
        raise MalformedLease(field, value, f"more than {duration:g}s in the future")
    return moment


def _read_duration(spec: Mapping[str, Any], default: float) -> float:
    value = spec.get("leaseDurationSeconds")
    if value is None:
        return default
    longest = max(MAX_LEASE_SECONDS, default)
    # bool is an int to Python, never to the API server.
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= longest:
        raise MalformedLease("leaseDurationSeconds", value, f"not an integer from 1 to {longest:g}")
    return float(value)


def read_record(spec: object, *, now: datetime.datetime, default_duration: float) -> LeaseRecord:
    """The Lease's spec, checked; raises MalformedLease naming the first bad field."""
    if spec is None:
        spec = {}
    if not isinstance(spec, Mapping):
        raise MalformedLease("spec", spec, "not an object")
    holder = spec.get("holderIdentity")
    if holder is not None and not isinstance(holder, str):
        raise MalformedLease("holderIdentity", holder, "not a string")
    duration = _read_duration(spec, default_duration)
    acquired = _read_time(spec, "acquireTime", now=now, duration=duration)
    renewed = _read_time(spec, "renewTime", now=now, duration=duration)
    return LeaseRecord(holder=holder or "", renewed=renewed or acquired, duration=duration)


def current_transitions(spec: object) -> int:
    """leaseTransitions as read; a value that is not a count starts over at 0."""
    value = spec.get("leaseTransitions") if isinstance(spec, Mapping) else None
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= INT32_MAX:
        return 0
    return value


def candidate_identity() -> str:
    """Who holds the Lease, as `kubectl get lease` shows it: POD_NAME when set (the
    Downward API gives a Pod's name; the shard ring's identity too), else the host's
    name with a random suffix, as controller-runtime's. With POD_NAME, a container
    restarted in the same Pod takes its Lease back at once instead of waiting for it
    to expire."""
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


class LeaderElector:
    def __init__(
        self,
        api: Api,
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
        self.identity = identity or candidate_identity()
        self.lost = asyncio.Event()
        self._renewer: asyncio.Task[None] | None = None
        self._observed_record: str | None = None
        self._observed_at = 0.0
        self._reported_malformed: str | None = None
        self._changed = asyncio.Event()  # the watch saw the Lease change
        self._next_try_in = retry_period  # seconds: sooner when the holder's lease expires sooner

    @property
    def _lease(self) -> str:
        return f"{self.namespace}/{self.name}"

    async def acquire(self) -> None:
        """Wait until this candidate holds the Lease, then keep renewing it."""
        log.info("waiting for leadership lease=%s identity=%s", self._lease, self.identity)
        watcher = asyncio.create_task(self._watch_lease(), name="leader-lease-watch")
        try:
            while True:
                self._next_try_in = self.retry_period
                try:
                    if await self._try_acquire():
                        break
                except (ApiError, OSError) as error:
                    log.warning("lease acquisition failed lease=%s error=%s", self._lease, error)
                except Exception:
                    # A standby retries whatever it met; only a bug gets here.
                    log.error("lease acquisition failed lease=%s", self._lease, exc_info=True)
                await self._until_next_try()
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        log.info("became leader lease=%s identity=%s", self._lease, self.identity)
        self._renewer = asyncio.create_task(self._renew_loop(), name="leader-renew")

    # ----- the standby ---------------------------------------------------------
    async def _try_acquire(self) -> bool:
        lease = await self._get_lease()
        if lease is None:
            return await self._create()
        spec = lease.get("spec")
        unchanged_for = self._observe(spec)
        try:
            record = read_record(spec, now=_now(), default_duration=self.lease_duration)
        except MalformedLease as problem:
            self._report_malformed_once(spec, problem)
            if unchanged_for < self.lease_duration:
                return False
            log.warning(
                "taking over a malformed lease unchanged for %gs lease=%s identity=%s",
                self.lease_duration,
                self._lease,
                self.identity,
            )
            return await self._write(lease)
        held_by_another = record.holder not in ("", self.identity)
        if held_by_another and not self._expired(record, unchanged_for):
            self._next_try_in = min(self.retry_period, self._expires_in(record, unchanged_for))
            return False
        return await self._write(lease)

    async def _until_next_try(self) -> None:
        """A retry period, or less: until the watch sees the Lease change, or
        the holder's lease is due to expire."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout=max(self._next_try_in, 0.0))
        self._changed.clear()

    async def _watch_lease(self) -> None:
        """Each change of the Lease, timed as it comes and waking the standby."""
        backoff = self.retry_period
        while True:
            try:
                async for event in self.api.watch(
                    LEASES,
                    self.namespace,
                    field_selector=f"metadata.name={self.name}",
                    timeout_seconds=300,
                ):
                    backoff = self.retry_period
                    if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                        if event.get("type") != "DELETED":
                            self._observe((event.get("object") or {}).get("spec"))
                        self._changed.set()
            except asyncio.CancelledError:
                raise
            except ApiError as error:
                if error.status == 403:
                    log.info(
                        "not watching the lease, polling it every %gs lease=%s "
                        "(allow watch on leases for a faster takeover) error=%s",
                        self.retry_period,
                        self._lease,
                        error,
                    )
                    return
                log.debug("lease watch failed lease=%s error=%s", self._lease, error)
            except Exception as error:
                log.debug("lease watch failed lease=%s error=%s", self._lease, error)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, WATCH_BACKOFF_MAX)

    def _observe(self, spec: object) -> float:
        """Seconds, by our own clock, since the Lease's record last changed."""
        record = json.dumps(spec, sort_keys=True, default=repr)
        now = asyncio.get_running_loop().time()
        if record != self._observed_record:
            self._observed_record = record
            self._observed_at = now
        return now - self._observed_at

    @staticmethod
    def _expires_in(record: LeaseRecord, unchanged_for: float) -> float:
        """Seconds until `_expired` holds, by our clock or the record's renewTime."""
        by_our_clock = record.duration - unchanged_for
        if record.renewed is not None:
            renewed_for = (_now() - record.renewed).total_seconds()
            by_our_clock = min(by_our_clock, record.duration - renewed_for)
        return max(by_our_clock, 0.0) + EXPIRY_MARGIN

    @staticmethod
    def _expired(record: LeaseRecord, unchanged_for: float) -> bool:
        if unchanged_for >= record.duration or record.renewed is None:
            return True
        return record.renewed + datetime.timedelta(seconds=record.duration) < _now()

    def _report_malformed_once(self, spec: object, problem: MalformedLease) -> None:
        """One line per holder and kind of problem, not one per renewal of a bad Lease."""
        holder = spec.get("holderIdentity") if isinstance(spec, Mapping) else None
        kind = f"{holder!r} {problem.field} {problem.problem}"
        if kind == self._reported_malformed:
            return
        self._reported_malformed = kind
        log.warning(
            "lease is malformed, waiting %gs unchanged before taking it over lease=%s holder=%s %s",
            self.lease_duration,
            self._lease,
            _shown(holder),
            problem,
        )

    async def _create(self) -> bool:
        try:
            await self.api.create(LEASES, self._body(_now(), transitions=0), self.namespace)
        except ApiError as error:
            if error.status == 409:
                return False
            raise
        return True

    # ----- the leader ----------------------------------------------------------
    async def _renew_loop(self) -> None:
        try:
            await self._keep_renewing()
        except LeadershipLost as reason:
            self._give_up(str(reason))
        except Exception:
            # Never a leader without a renewer: whatever broke, stop reconciling.
            log.error(
                "leadership lost lease=%s identity=%s reason=the renewer failed",
                self._lease,
                self.identity,
                exc_info=True,
            )
            self.lost.set()

    async def _keep_renewing(self) -> None:
        last_renewed = asyncio.get_running_loop().time()
        while True:
            await asyncio.sleep(self.retry_period)
            try:
                renewed = await asyncio.wait_for(self._renew(), self.retry_period)
            except (ApiError, OSError, TimeoutError) as error:
                log.warning("lease renewal failed lease=%s error=%s", self._lease, error)
                renewed = False
            now = asyncio.get_running_loop().time()
            if renewed:
                last_renewed = now
            elif now - last_renewed > self.renew_deadline:
                raise LeadershipLost(f"not renewed within the {self.renew_deadline:g}s deadline")

    async def _renew(self) -> bool:
        """True when renewed, False to retry; raises LeadershipLost when the Lease says
        we are not the leader any more."""
        lease = await self._get_lease()
        if lease is None:
            raise LeadershipLost("the lease was deleted")
        spec = lease.get("spec")
        try:
            record = read_record(spec, now=_now(), default_duration=self.lease_duration)
        except MalformedLease as problem:
            raise LeadershipLost(f"malformed lease {problem}") from None
        if record.holder != self.identity:
            raise LeadershipLost(f"held by {_shown(record.holder) if record.holder else 'nobody'}")
        return await self._write(lease)

    def _give_up(self, reason: str) -> None:
        log.error(
            "leadership lost lease=%s identity=%s reason=%s", self._lease, self.identity, reason
        )
        self.lost.set()

    # ----- both ----------------------------------------------------------------
    async def _get_lease(self) -> dict[str, Any] | None:
        try:
            return await self.api.get(LEASES, self.name, self.namespace)
        except ApiError as error:
            if error.status == 404:
                return None
            raise

    async def _write(self, lease: Mapping[str, Any]) -> bool:
        """Replace the Lease with our record, unless it changed since it was read."""
        spec = lease.get("spec") or {}
        transitions = current_transitions(spec)
        ours = spec.get("holderIdentity") == self.identity
        if not ours:
            transitions = transitions + 1 if transitions < INT32_MAX else 1
        body = self._body(_now(), transitions=transitions)
        if ours and spec.get("acquireTime"):
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

    def stop_renewing(self) -> None:
        if self._renewer is not None:
            self._renewer.cancel()

    async def release(self) -> None:
        """On a clean shutdown, hand the Lease over at once instead of letting it expire."""
        self.stop_renewing()
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
            log.warning("could not release the lease %s: %s", self._lease, error)
