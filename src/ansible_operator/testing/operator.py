"""Run an operator (`ansible-operator run`) as a child process for tests."""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

from ansible_operator.manager.bound_addresses import read_bound_addresses
from ansible_operator.testing.metrics import metric_value, scrape

# In `args`, so that `OperatorProcess.metric` has an endpoint to read.
SERVE_METRICS = "--metrics-bind-address=127.0.0.1:0"


class OperatorProcess:
    """`ansible-operator run` over a watches file, logging to a file.

    What a test waits on is what the operator exposes: where its servers listen
    (`--bound-addresses-file`), `/readyz`, its metrics, its Lease; never a line of
    its log. Its processes die with the test process (a new session, killed on
    stop), so an interrupted test run leaves no operator behind.
    """

    def __init__(
        self,
        watches_file: Path,
        kubeconfig: Path,
        *,
        log_path: Path,
        args: list[str] | None = None,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        open_files: tuple[int, int] | None = None,
    ) -> None:
        self.watches_file = watches_file
        self.kubeconfig = kubeconfig
        self.log_path = log_path
        self.args = args or []
        self.env = env or {}
        self.cwd = cwd or watches_file.parent
        self.open_files = open_files  # (soft, hard) RLIMIT_NOFILE of the operator
        self.process: subprocess.Popen[bytes] | None = None
        self.addresses_file = log_path.with_name(f"{log_path.stem}.addresses.json")
        # Its Lease holder identity (leader election and the shard ring read POD_NAME).
        self.identity = self.env.get("POD_NAME") or f"operator-{uuid.uuid4().hex[:10]}"
        self._addresses: dict[str, tuple[str, int]] | None = None

    def start(self, *, wait_ready: bool = True, timeout: float = 60.0) -> OperatorProcess:
        """Start it; with `wait_ready`, return once `/readyz` answers 200 (its
        controllers run, or, under leader election, it stands by)."""
        env = dict(os.environ)
        env.update(
            KUBECONFIG=str(self.kubeconfig), ANSIBLE_GATHERING="explicit", POD_NAME=self.identity
        )
        env.update(self.env)
        command = [
            sys.executable,
            "-m",
            "ansible_operator.cli",
            "run",
            f"--watches-file={self.watches_file}",
            "--health-probe-bind-address=127.0.0.1:0",
            "--metrics-bind-address=0",
            "--proxy-port=0",
            f"--bound-addresses-file={self.addresses_file}",
            *self.args,
        ]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.addresses_file.unlink(missing_ok=True)
        self._addresses = None
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                command,
                cwd=self.cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=self._limit_open_files if self.open_files else None,
            )
        if wait_ready:
            self.wait_ready(timeout=timeout)
        return self

    def _limit_open_files(self) -> None:
        assert self.open_files is not None
        resource.setrlimit(resource.RLIMIT_NOFILE, self.open_files)

    @property
    def logs(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def _alive(self, waiting_for: str) -> None:
        if self.process is not None and self.process.poll() is not None:
            raise AssertionError(
                f"operator exited with {self.process.returncode} before {waiting_for}; "
                f"log:\n{self.logs[-4000:]}"
            )

    def addresses(self, timeout: float = 60.0) -> dict[str, tuple[str, int]]:
        """Where its servers listen (`health`, `metrics`, `proxy`, `webhook`), once they do."""
        deadline = time.monotonic() + timeout
        while self._addresses is None:
            self._addresses = read_bound_addresses(self.addresses_file)
            if self._addresses is not None:
                break
            self._alive("its servers listened")
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the operator's servers did not listen in {timeout}s; "
                    f"log:\n{self.logs[-4000:]}"
                )
            time.sleep(0.05)
        return self._addresses

    def port(self, server: str, timeout: float = 60.0) -> int:
        """The port `server` (`health`, `metrics`, `proxy`, `webhook`) listens on."""
        addresses = self.addresses(timeout)
        if server not in addresses:
            raise AssertionError(f"no {server} server: it serves {sorted(addresses)}")
        return addresses[server][1]

    def health(self, path: str = "/readyz") -> int:
        url = f"http://127.0.0.1:{self.port('health')}{path}"
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return response.status
        except urllib.error.HTTPError as error:
            return error.code

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until `/readyz` answers 200."""
        deadline = time.monotonic() + timeout
        while True:
            self._alive("it was ready")
            with contextlib.suppress(OSError):
                if self.health("/readyz") == 200:
                    return
            if time.monotonic() > deadline:
                raise AssertionError(f"operator not ready in {timeout}s; log:\n{self.logs[-4000:]}")
            time.sleep(0.1)

    def wait_leading(self, timeout: float = 60.0) -> None:
        """Until it holds its leader Lease (`--leader-elect`; needs `SERVE_METRICS`): a
        replica that stands by is ready too."""
        deadline = time.monotonic() + timeout
        while self.metric("leader_election_master_status") != 1:
            self._alive("it led")
            if time.monotonic() > deadline:
                raise AssertionError(f"not leading in {timeout}s; log:\n{self.logs[-4000:]}")
            time.sleep(0.1)

    def lease_identity(self) -> str:
        """The identity it holds Leases under (leader election, the shard ring)."""
        return self.identity

    def exposition(self) -> str:
        """The operator's /metrics, read once (it was started with `SERVE_METRICS`)."""
        if "metrics" not in self.addresses():
            raise AssertionError(f"no metrics server: start the operator with {SERVE_METRICS}")
        return scrape(self.port("metrics"))

    def metric(self, name: str, /, **labels: str) -> float:
        """The operator's metric `name` (summed over series matching `labels`)."""
        return metric_value(self.exposition(), name, **labels)

    def stop(self, timeout: float = 40.0) -> int | None:
        """SIGTERM (graceful), then SIGKILL the whole group after `timeout`."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        return self.process.returncode

    def kill(self) -> None:
        """SIGKILL the operator and every Ansible process it started."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
