"""Whether the API server answers: what health probes judge the operator by.

Any HTTP answer counts, an error status too (the server is there); a refused
connection, a TLS failure or a timeout does not.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class Reachability:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.last_answer = clock()
        self.failing_since: float | None = None
        self.server = ""  # the address that last failed, and how
        self.last_error = ""

    def answered(self) -> None:
        self.last_answer = self._clock()
        self.failing_since = None

    def failed(self, server: str, error: str) -> None:
        if self.failing_since is None:
            self.failing_since = self._clock()
        self.server, self.last_error = server, error

    def unreachable_for(self) -> float:
        """Seconds since the first failure with no answer after it (0: answering)."""
        if self.failing_since is None:
            return 0.0
        return self._clock() - self.failing_since

    def quiet_for(self) -> float:
        """Seconds since the last answer."""
        return self._clock() - self.last_answer
