"""What one client of the webhook port may take: requests per second, and run slots.

Anyone who can reach the webhook Service (any Pod, unless `--webhook-client-ca`) can post
AdmissionReviews, and each one costs an Ansible run. Left first come first served, one
client flooding the port fills every run slot and its wait, and the API server's own
requests time out: a denial of service under `failurePolicy: Fail`, a bypass under
`Ignore`. So, per client address (the API server uses one or a few):

- a token bucket (`PeerRate`): past its rate, a request is answered 429 at once, before its
  body is read;
- the run slots are handed out fairly (`FairSlots`): a freed slot goes to the waiting client
  that holds fewest, so the API server's request waits for one run to end, not for the
  flood; each client may queue only as many requests as there are slots, and the queue as a
  whole four times that: past either, 429 at once.

A 429 reaches the API server at once, so its failure policy decides, not its timeout.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

DEFAULT_RATE = 20.0  # requests per second per client address
DEFAULT_BURST = 40
QUEUE_PER_SLOT = 4  # the whole wait queue: this many requests per run slot
MAX_PEERS = 4096  # buckets kept; full ones are dropped first


class SlotsBusy(Exception):
    """No room in the wait for a run slot: answered 429."""


@dataclass
class _Bucket:
    tokens: float
    at: float


class PeerRate:
    """A token bucket per client address: `rate` requests a second, `burst` at once."""

    def __init__(
        self,
        rate: float = DEFAULT_RATE,
        burst: int = DEFAULT_BURST,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate, self.burst, self.clock = rate, burst, clock
        self._buckets: dict[str, _Bucket] = {}

    def retry_after(self, peer: str) -> float | None:
        """Take a token for one request of `peer`; None if it had one, else the seconds
        until it will."""
        now = self.clock()
        bucket = self._buckets.get(peer)
        if bucket is None:
            self._make_room(now)
            bucket = self._buckets[peer] = _Bucket(float(self.burst), now)
        bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.at) * self.rate)
        bucket.at = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return None
        return (1.0 - bucket.tokens) / self.rate

    def _make_room(self, now: float) -> None:
        if len(self._buckets) < MAX_PEERS:
            return
        refill = self.burst / self.rate
        for peer in [p for p, b in self._buckets.items() if now - b.at >= refill]:
            del self._buckets[peer]  # full again: the same as no bucket
        while len(self._buckets) >= MAX_PEERS:
            del self._buckets[next(iter(self._buckets))]  # the longest unused


class FairSlots:
    """`slots` run slots shared fairly between client addresses (see the module)."""

    def __init__(self, slots: int, queue: int | None = None) -> None:
        self.slots = max(1, slots)
        self.queue_per_peer = self.slots
        self.queue = queue if queue is not None else QUEUE_PER_SLOT * self.slots
        self.running: dict[str, int] = {}
        self._waiting: dict[str, deque[Ticket]] = {}
        self._order = itertools.count()  # ties between clients: the longest waiting first

    @property
    def free(self) -> int:
        return self.slots - sum(self.running.values())

    @property
    def waiting(self) -> int:
        return sum(len(queue) for queue in self._waiting.values())

    def reserve(self, peer: str) -> Ticket:
        """A place in the wait for `peer`; SlotsBusy if there is none."""
        queue = self._waiting.get(peer)
        if self.free <= 0:
            if queue is not None and len(queue) >= self.queue_per_peer:
                raise SlotsBusy(
                    f"{len(queue)} admission requests of {peer} already wait for a run slot"
                )
            if self.waiting >= self.queue:
                raise SlotsBusy(f"{self.waiting} admission requests already wait for a run slot")
        ticket = Ticket(self, peer, next(self._order))
        self._waiting.setdefault(peer, deque()).append(ticket)
        self._dispatch()
        return ticket

    def _dispatch(self) -> None:
        while self.free > 0 and self._waiting:
            peer = min(
                self._waiting,
                key=lambda p: (self.running.get(p, 0), self._waiting[p][0].order),
            )
            queue = self._waiting[peer]
            ticket = queue.popleft()
            if not queue:
                del self._waiting[peer]
            self.running[peer] = self.running.get(peer, 0) + 1
            ticket.granted.set_result(None)

    def _withdraw(self, ticket: Ticket) -> None:
        queue = self._waiting.get(ticket.peer)
        if queue is not None and ticket in queue:
            queue.remove(ticket)
            if not queue:
                del self._waiting[ticket.peer]

    def _release(self, peer: str) -> None:
        left = self.running.get(peer, 0) - 1
        if left > 0:
            self.running[peer] = left
        else:
            self.running.pop(peer, None)
        self._dispatch()


class Ticket:
    """One request's place: `async with` waits for its slot and holds it; `close` gives
    back whatever it still has (idempotent), for a run that ended before it waited."""

    def __init__(self, slots: FairSlots, peer: str, order: int) -> None:
        self.slots, self.peer, self.order = slots, peer, order
        self.granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._closed = False

    async def __aenter__(self) -> None:
        try:
            await asyncio.shield(self.granted)
        except asyncio.CancelledError:
            self.close()
            raise

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.granted.done():
            self.slots._release(self.peer)
        else:
            self.granted.cancel()
            self.slots._withdraw(self)
