"""Run an operator (`ansible-operator run`) as a child process for tests."""

from __future__ import annotations

import contextlib
import os
import re
import resource
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from ansible_operator.testing.metrics import metric_value, scrape

# In `args`, so that `OperatorProcess.metric` has an endpoint to read.
SERVE_METRICS = "--metrics-bind-address=127.0.0.1:0"


class OperatorProcess:
    """`ansible-operator run` over a watches file, logging to a file.

    Its processes die with the test process (a new session, killed on stop),
    so an interrupted test run leaves no operator behind.
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
        self.health_port: int | None = None

    def start(self, *, wait_ready: bool = True, timeout: float = 60.0) -> OperatorProcess:
        env = dict(os.environ)
        env.update(KUBECONFIG=str(self.kubeconfig), ANSIBLE_GATHERING="explicit")
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
            *self.args,
        ]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
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
            self.wait_for_log(r"operator started", timeout=timeout)
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

    def wait_for_log(self, pattern: str, *, timeout: float = 60.0, after: int = 0) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        compiled = re.compile(pattern)
        while time.monotonic() < deadline:
            match = compiled.search(self.logs, after)
            if match:
                return match
            if self.process is not None and self.process.poll() is not None:
                raise AssertionError(
                    f"operator exited with {self.process.returncode} before logging "
                    f"{pattern!r}; log:\n{self.logs[-4000:]}"
                )
            time.sleep(0.1)
        raise AssertionError(
            f"operator did not log {pattern!r} in {timeout}s; log:\n{self.logs[-4000:]}"
        )

    def health(self, path: str = "/readyz") -> int:
        match = re.search(r"health server listening address=\('[\d.]+', (\d+)\)", self.logs)
        if not match:
            raise AssertionError("health server address not logged")
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{match.group(1)}{path}", timeout=2
            ) as response:
                return response.status
        except urllib.error.HTTPError as error:
            return error.code

    def lease_identity(self, timeout: float = 60.0) -> str:
        """The identity this replica campaigns for the leader Lease under (the
        Lease's holderIdentity once it leads), as it announces it at start."""
        pattern = r"waiting for leadership lease=\S+ identity=(\S+)"
        return self.wait_for_log(pattern, timeout=timeout).group(1)

    def exposition(self) -> str:
        """The operator's /metrics, read once (it was started with `SERVE_METRICS`)."""
        match = re.search(r"metrics server listening address=\('[\d.]+', (\d+)\)", self.logs)
        if not match:
            raise AssertionError(f"no metrics server: start the operator with {SERVE_METRICS}")
        return scrape(int(match.group(1)))

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
