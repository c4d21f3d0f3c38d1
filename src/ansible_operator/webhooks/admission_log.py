"""What the operator says about admission decisions, sized for a busy cluster.

A validating webhook on Pods or ConfigMaps is asked about every create in the
cluster: a line per allowed request would be most of the operator's log, and
its size would follow the cluster's traffic (or an attacker's). So, as
controller-runtime's webhooks do (their per-request line is at V(1)):

- an allowed request is a DEBUG line (`--zap-log-level=debug` shows each);
- a denied one is an INFO line: somebody's change was refused, and whoever
  asks why finds the object and the reason;
- a decision the failurePolicy made because the run could not is a WARNING
  (the webhook itself is failing);
- once a minute, for each webhook that decided anything, an INFO summary
  (allowed, denied, by policy, patched), so the log still shows the webhook at
  work when its per-request lines are off.

Every decision is also counted in `ansible_operator_webhook_admissions_total`.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from dataclasses import dataclass, field

log = logging.getLogger("ansible_operator.webhooks")

SUMMARY_INTERVAL = 60.0  # seconds between two summaries of one webhook


@dataclass
class _Tally:
    decisions: Counter[str] = field(default_factory=Counter)
    patched: int = 0


class AdmissionSummary:
    """Decisions per webhook since the last summary."""

    def __init__(self, interval: float = SUMMARY_INTERVAL) -> None:
        self.interval = interval
        self._tallies: dict[str, _Tally] = {}

    def record(self, webhook: str, decision: str, *, patched: bool) -> None:
        """`decision`: allowed, denied or policy."""
        tally = self._tallies.setdefault(webhook, _Tally())
        tally.decisions[decision] += 1
        tally.patched += int(patched)

    def flush(self) -> list[str]:
        """The summary lines of what was recorded since the last flush (none if nothing
        was), logged at INFO; the tallies start again from zero."""
        lines = []
        for webhook, tally in sorted(self._tallies.items()):
            decisions = tally.decisions
            lines.append(
                f"admissions in the last {self.interval:g}s webhook={webhook} "
                f"allowed={decisions['allowed']} denied={decisions['denied']} "
                f"by_policy={decisions['policy']} patched={tally.patched}"
            )
        self._tallies.clear()
        for line in lines:
            log.info("%s", line)
        return lines

    async def run(self) -> None:
        """Flush every `interval` until cancelled."""
        while True:
            await asyncio.sleep(self.interval)
            self.flush()
