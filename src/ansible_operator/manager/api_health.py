"""What /readyz and /healthz say about the API server.

controller-runtime answers both with a bare ping, so an operator whose API
server is gone (stopped, moved to another port, its certificate replaced)
looks healthy while it does nothing. Ours:

- /readyz fails once the API server has been unreachable for `ready_grace`
  (default 30s): the operator cannot do its work, and a rolling update should
  not count it as available;
- /healthz fails once it has been unreachable for `live_grace` (default 5m):
  long enough that a restart (new connections, names resolved again, the
  in-cluster address read again) may help, short blips aside.

Any HTTP answer counts as reachable (kube/reachability.py). An operator that
has heard nothing from the server for PROBE_INTERVAL asks it for `/version`,
so an idle one notices too, and reads a changed kubeconfig (kube/config.py).
"""

from __future__ import annotations

import asyncio
import logging

from ansible_operator.kube.client import ApiClient, ApiError

log = logging.getLogger("ansible_operator.manager")

PROBE_INTERVAL = 5.0  # seconds of silence from the API server before asking it
PROBE_TIMEOUT = 10.0


class ApiServerHealth:
    def __init__(self, api: ApiClient, *, ready_grace: float, live_grace: float) -> None:
        self.api = api
        self.ready_grace = ready_grace
        self.live_grace = live_grace
        self._said_lost = False

    def _problem(self, grace: float) -> str | None:
        """Why the API server counts as lost after `grace` seconds (0: never)."""
        reachability = self.api.reachability
        unreachable = reachability.unreachable_for()
        if not grace or unreachable < grace:
            return None
        return (
            f"API server {reachability.server} unreachable for {unreachable:.0f}s: "
            f"{reachability.last_error}"
        )

    def unready_reason(self) -> str | None:
        return self._problem(self.ready_grace)

    def unhealthy_reason(self) -> str | None:
        return self._problem(self.live_grace)

    async def probe_forever(self) -> None:
        reachability = self.api.reachability
        while True:
            await asyncio.sleep(PROBE_INTERVAL)
            if reachability.quiet_for() >= PROBE_INTERVAL:
                try:
                    async with asyncio.timeout(PROBE_TIMEOUT):
                        await self.api.request("GET", "/version")
                except ApiError:
                    pass  # an answer (a 403 too) or a failure: recorded by the client
                except TimeoutError:
                    reachability.failed(
                        self.api.config.server, f"no answer to GET /version in {PROBE_TIMEOUT:.0f}s"
                    )
            self._say_changes()

    def _say_changes(self) -> None:
        """One line when the server is lost past the readiness grace, one when it is back."""
        reason = self.unready_reason()
        if reason is not None and not self._said_lost:
            log.error("%s; /readyz fails until it answers", reason)
            self._said_lost = True
        elif reason is None and self._said_lost and self.api.reachability.unreachable_for() == 0:
            log.info("API server answers again server=%s", self.api.config.server)
            self._said_lost = False
