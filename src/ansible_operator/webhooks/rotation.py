"""The operator-made webhook certificate, kept fresh while the operator runs.

As controller-runtime's cert-rotator does, in the background of every replica:
- the CA in the Secret is renewed when it nears its end (the first replica to write wins,
  the others read it back), and a CA another replica renewed is noticed at the next look;
- the caBundle of the configurations holds the CA and the CAs it replaced until they end,
  so the API server trusts the certificates of every replica during the change;
- the serving certificate is issued again at 2/3 of its life, or from the new CA once the
  bundle holding it has been applied for a moment (`Lifetimes.settle`), and loaded into the
  live server's TLS context: new connections get it, the server never stops.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from ansible_operator.webhooks.tls import (
    CaSet,
    CaStore,
    Issued,
    Lifetimes,
    ServingTls,
    current_ca,
    issue_serving,
)

log = logging.getLogger("ansible_operator.webhooks")

# Writes the caBundle where the configurations lack it; True when it wrote.
ApplyBundle = Callable[[bytes], Awaitable[bool]]
SHORTEST_WAIT = 0.2  # seconds: a deadline just passed is not a reason to spin


def now_utc() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def serving_renewal(
    issued: Issued, ca: CaSet, bundle_settled: bool, now: datetime.datetime, lifetimes: Lifetimes
) -> str | None:
    """Why the serving certificate must be issued again now; None: not yet. From a new CA
    only once the API server has had the bundle holding it for a while (`bundle_settled`):
    until then the old certificate, still valid, keeps being trusted."""
    if issued.ca_cert_pem != ca.cert_pem:
        return "the CA was renewed" if bundle_settled else None
    if now >= issued.renew_at(lifetimes.serving_renew_at):
        return f"it ends at {issued.not_after.isoformat()}"
    return None


class CertificateRotation:
    def __init__(
        self,
        serving: ServingTls,
        names: list[str],
        directory: Path,
        lifetimes: Lifetimes,
        apply_bundle: ApplyBundle | None,  # None: the configurations are not ours
        *,
        bundle_applied_at: datetime.datetime | None,  # when start-up applied serving's bundle
    ) -> None:
        assert serving.store is not None and serving.authority is not None
        assert serving.issued is not None
        self.serving = serving
        self.store: CaStore = serving.store
        self.ca: CaSet = serving.authority
        self.issued: Issued = serving.issued
        self.names = names
        self.directory = directory
        self.lifetimes = lifetimes
        self.apply_bundle = apply_bundle
        self.bundle = serving.ca_bundle or b""
        self.bundle_since = bundle_applied_at

    async def run(self) -> None:
        """Step at each deadline and at least every `check_every`, until cancelled; a step
        that fails (the API server away) is tried again."""
        retry = min(self.lifetimes.check_every.total_seconds(), 30.0)
        while True:
            now = now_utc()
            try:
                wait = (await self.step(now) - now_utc()).total_seconds()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # the next step tries again; the old certificate serves
                log.warning(
                    "webhook certificate rotation failed, trying again in %.0fs: %s", retry, error
                )
                wait = retry
            await asyncio.sleep(max(wait, SHORTEST_WAIT))

    def settled(self, now: datetime.datetime) -> bool:
        return self.bundle_since is not None and now >= self.bundle_since + self.lifetimes.settle

    async def step(self, now: datetime.datetime) -> datetime.datetime:
        """Renew what is due; when to step next."""
        ca, renewed_here = await current_ca(
            self.store, self.lifetimes, now, keep_for=self.lifetimes.ca_renew_before
        )
        if ca.cert_pem != self.ca.cert_pem and not renewed_here:
            log.info(
                "webhook CA changed in %s (renewed by another replica) until=%s",
                self.store.where,
                ca.not_after.isoformat(),
            )
        self.ca = ca
        bundle = ca.bundle(now)
        if bundle != self.bundle:
            self.bundle, self.bundle_since = bundle, None
        wrote = await self.apply_bundle(bundle) if self.apply_bundle is not None else False
        if wrote or self.bundle_since is None:
            self.bundle_since = now
        reason = serving_renewal(self.issued, ca, self.settled(now), now, self.lifetimes)
        if reason is not None:
            renewed = issue_serving(
                ca, self.names, self.directory, self.lifetimes, now, self.serving.context
            )
            assert renewed.issued is not None
            self.issued = renewed.issued
            log.info(
                "webhook serving certificate renewed until=%s because=%r ca_until=%s",
                self.issued.not_after.isoformat(),
                reason,
                ca.not_after.isoformat(),
            )
        return self.next_step(now)

    def next_step(self, now: datetime.datetime) -> datetime.datetime:
        """The first deadline ahead: the serving certificate's renewal, the CA's, the end of
        a replaced CA (out of the bundle), the bundle settled; at latest `check_every`."""
        deadlines = [
            self.issued.renew_at(self.lifetimes.serving_renew_at),
            self.ca.not_after - self.lifetimes.ca_renew_before,
            *(CaSet(pem, b"").not_after for pem in self.ca.still_valid(now)),
        ]
        if self.issued.ca_cert_pem != self.ca.cert_pem and self.bundle_since is not None:
            deadlines.append(self.bundle_since + self.lifetimes.settle)
        ahead = [deadline for deadline in deadlines if deadline > now]
        return min([*ahead, now + self.lifetimes.check_every])
