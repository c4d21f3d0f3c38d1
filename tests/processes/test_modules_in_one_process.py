"""A run's modules one after another in one process of its session
(acceleration modules-in-one-process): whatever a module leaves behind, the
next module finds the process as a fresh fork of the session would be; what
can be put back keeps the process serving, anything else retires it; a
module that is not known to leave nothing else retires it too; a module that
comes while it is busy gets a fork of its own; a killed caller takes its
module with it. Real module interpreter and sessions; no Ansible run.

The modules are payloads as Ansible's wrapper runs them (runpy.run_module
from a zip on sys.path), named as the known modules are named."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_operator.runner.warm.accelerations import module_handoff
from ansible_operator.runner.warm.accelerations.module_handoff import hand_off
from ansible_operator.runner.warm.module_server import SESSION_ENV, open_session, write_shim
from ansible_operator.testing.waiting import eventually

KNOWN = "ansible_collections.kubernetes.core.plugins.modules.k8s_info"
UNKNOWN = "ansible_collections.example.things.plugins.modules.thing"
# What a module may leave in its process: (its code, whether it can be put back).
LEFT_BEHIND = {
    "environment variable": ('os.environ["AO_LEFT"] = "left"', True),
    "working directory": ('os.chdir("/")', True),
    "sys.path entry": ('sys.path.insert(0, "/left/behind")', True),
    "imported module": ("import json.tool", True),
    "ansible warning": (
        "from ansible.module_utils.common.warnings import warn\nwarn('left behind')",
        True,
    ),
    "ansible deprecation": (
        "from ansible.module_utils.common.warnings import deprecate\n"
        "deprecate('left behind', version='9.9')",
        True,
    ),
    "ansible global rebound": (
        "from ansible.module_utils import basic\nbasic._ANSIBLE_ARGS = b'left'",
        True,
    ),
    "ansible global added": ("from ansible.module_utils import basic\nbasic.AO_LEFT = 1", True),
    "kubernetes default configuration": (
        "import kubernetes.client as k\n"
        "k.Configuration.set_default(k.Configuration(host='http://left.behind'))",
        True,
    ),
    "root logger handler": ("import logging\nlogging.basicConfig()", True),
    "warnings filter": ("import warnings\nwarnings.simplefilter('error')", True),
    "pending alarm": ("import signal\nsignal.setitimer(signal.ITIMER_REAL, 60)", True),
    "exit function": (
        "import atexit\natexit.register(lambda: open(os.environ['AO_MARK'], 'w').close())",
        True,
    ),
    "thread": (
        "import threading, time\n"
        "threading.Thread(target=time.sleep, args=(5,), daemon=True).start()",
        False,
    ),
    "child process": ("import subprocess\nsubprocess.Popen(['sleep', '5'])", False),
    "open descriptor": ("os.open('/dev/null', os.O_RDONLY)", False),
    "signal handler": ("import signal\nsignal.signal(signal.SIGUSR1, lambda *_: None)", False),
    "umask": ("os.umask(0o077)", False),
    "default socket timeout": ("import socket\nsocket.setdefaulttimeout(7)", False),
}
OBSERVE = """
import json, locale, logging, multiprocessing.util, os, signal, sys, warnings
import kubernetes.client
from ansible.module_utils import basic
from ansible.module_utils.common import warnings as ansible_warnings
print(json.dumps({
    "pid": os.getpid(),
    "environment": os.environ.get("AO_LEFT"),
    "cwd": os.getcwd(),
    "sys.path": [entry for entry in sys.path if "left" in entry],
    "imported": "json.tool" in sys.modules,
    "warnings": len(ansible_warnings.get_warning_messages()),
    "deprecations": len(ansible_warnings.get_deprecation_messages()),
    "ansible args": repr(basic._ANSIBLE_ARGS),
    "ansible global": hasattr(basic, "AO_LEFT"),
    "kubernetes host": kubernetes.client.Configuration.get_default_copy().host,
    "root handlers": len(logging.root.handlers),
    "locale": locale.setlocale(locale.LC_ALL),
    "filters": len(warnings.filters),
    "alarm": signal.getitimer(signal.ITIMER_REAL)[0],
    # What the process registered to run at its exit (multiprocessing's: the
    # process is ending) has not run: only what a module registers runs at its end.
    "exiting": multiprocessing.util.is_exiting(),
}))
"""


@pytest.fixture
def server(tmp_path: Path, module_interpreter: Path) -> Iterator[Path]:
    module_handoff.configure(tmp_path / "python", module_interpreter)
    yield module_interpreter
    module_handoff.configure(Path(), Path())


class Session:
    """A run's session of the module interpreter, and modules run in it as
    Ansible's payload wrapper runs them."""

    def __init__(self, server: Path, scratch: Path) -> None:
        self.scratch = scratch
        self.address = scratch / "session.sock"
        self.connection = open_session(server, self.address, "")
        assert self.connection is not None
        eventually(self.address.exists, timeout=10, interval=0.02, what="the session listening")
        self.count = 0
        # A task worker finds its run's session in its environment.
        self.outside = os.environ.get(SESSION_ENV)
        os.environ[SESSION_ENV] = str(self.address)

    def program(self, body: str, fqn: str = KNOWN) -> bytes:
        """A pipelined module program: `body` as module `fqn`, from a payload."""
        self.count += 1
        payload = self.scratch / f"payload-{self.count}.zip"
        parts = fqn.split(".")
        with zipfile.ZipFile(payload, "w") as archive:
            for depth in range(1, len(parts)):
                archive.writestr("/".join(parts[:depth]) + "/__init__.py", "")
            archive.writestr("/".join(parts) + ".py", "import os, sys\n" + body)
        return (
            "import runpy, sys\n"
            f"sys.path.insert(0, {str(payload)!r})\n"
            f"runpy.run_module({fqn!r}, init_globals={{'_modlib_path': {str(payload)!r}}},"
            " run_name='__main__', alter_sys=True)\n"
        ).encode()

    def run(self, body: str, fqn: str = KNOWN, **env: str) -> tuple[int, str]:
        environment = {**os.environ, **env}
        code, stdout, stderr = hand_off(environment, str(self.scratch), self.program(body, fqn))
        assert not stderr, stderr.decode()
        return code, stdout.decode()

    def observe(self) -> dict[str, object]:
        code, stdout = self.run(OBSERVE)
        assert code == 0
        return json.loads(stdout)

    def close(self) -> None:
        assert self.connection is not None
        self.connection.close()
        if self.outside is None:
            os.environ.pop(SESSION_ENV, None)
        else:
            os.environ[SESSION_ENV] = self.outside


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(left=st.sets(st.sampled_from(sorted(LEFT_BEHIND)), min_size=1))
def test_the_next_module_finds_none_of_what_one_left_behind(
    server: Path, tmp_path_factory: pytest.TempPathFactory, left: set[str]
) -> None:
    scratch = tmp_path_factory.mktemp("session")
    session = Session(server, scratch)
    try:
        before = session.observe()
        mark = scratch / "exit-function-ran"
        body = "\n".join(LEFT_BEHIND[name][0] for name in sorted(left))
        code, stdout = session.run(body + "\nprint(os.getpid())\nsys.exit(4)", AO_MARK=str(mark))
        assert code == 4
        leaving_pid = int(stdout.split()[-1])
        after = session.observe()
    finally:
        session.close()
    assert {**after, "pid": None} == {**before, "pid": None}
    if "exit function" in left:
        assert mark.exists()
    if all(LEFT_BEHIND[name][1] for name in left):
        assert before["pid"] == leaving_pid == after["pid"]  # one process served all three
    else:
        assert before["pid"] == leaving_pid != after["pid"]


def test_a_module_not_known_to_leave_nothing_behind_retires_its_process(
    server: Path, tmp_path: Path
) -> None:
    session = Session(server, tmp_path)
    try:
        first = session.observe()["pid"]
        code, stdout = session.run("print(os.getpid())", fqn=UNKNOWN)
        assert (code, int(stdout)) == (0, first)
        assert session.observe()["pid"] != first
    finally:
        session.close()


def test_a_module_coming_while_another_runs_gets_a_fork_of_its_own(
    server: Path, tmp_path: Path
) -> None:
    session = Session(server, tmp_path)
    release = tmp_path / "release"
    started = tmp_path / "started"
    waiting = (
        "import time\n"
        "open(os.environ['AO_STARTED'], 'w').write(str(os.getpid()))\n"
        "while not os.path.exists(os.environ['AO_RELEASE']):\n"
        "    time.sleep(0.02)\n"
        "print(os.getpid())\n"
    )
    answers: list[tuple[int, str]] = []
    try:
        first = threading.Thread(
            target=lambda: answers.append(
                session.run(waiting, AO_STARTED=str(started), AO_RELEASE=str(release))
            )
        )
        first.start()
        eventually(
            lambda: started.exists() and started.read_text(),
            timeout=20,
            interval=0.02,
            what="the first module running",
        )
        busy = int(started.read_text())
        during = session.observe()["pid"]
        release.touch()
        first.join(timeout=30)
        assert answers == [(0, f"{busy}\n")]
        assert during != busy
        assert session.observe()["pid"] == busy  # the process serves the next one again
    finally:
        release.touch()
        session.close()


def test_killing_the_caller_ends_its_module_and_the_session_serves_on(
    server: Path, tmp_path: Path
) -> None:
    session = Session(server, tmp_path)
    marker = tmp_path / "pid"
    shim = write_shim(tmp_path / "python", server)
    program = session.program(
        "import time\nopen(os.environ['AO_PID'], 'w').write(str(os.getpid()))\ntime.sleep(60)\n"
    )
    try:
        caller = start_caller(shim, program, session, marker)
        module_pid = int(marker.read_text())
        caller.send_signal(signal.SIGKILL)
        caller.wait()
        eventually(
            lambda: not Path(f"/proc/{module_pid}").exists(),
            timeout=10,
            interval=0.02,
            what="the module gone with its killed caller",
        )
        assert session.observe()["pid"] != module_pid
    finally:
        session.close()


def test_a_killed_run_takes_what_its_module_started_with_it(server: Path, tmp_path: Path) -> None:
    """A killed run: its session gone first (the run's fork that held it died),
    then its task's caller: the command its module started dies too, before
    it can write what it would have written after."""
    session = Session(server, tmp_path)
    marker = tmp_path / "pid"
    late = tmp_path / "written-after-the-kill"
    shim = write_shim(tmp_path / "python", server)
    program = session.program(
        "import subprocess, time\n"
        f"child = subprocess.Popen(['sh', '-c', 'sleep 1; echo late > {late}'])\n"
        "open(os.environ['AO_PID'], 'w').write(f'{os.getpid()} {child.pid} {os.getppid()}')\n"
        "time.sleep(60)\n"
    )
    caller = start_caller(shim, program, session, marker)
    *processes, session_pid = (int(pid) for pid in marker.read_text().split())
    session.close()
    eventually(
        lambda: not Path(f"/proc/{session_pid}").exists(),
        timeout=10,
        interval=0.02,
        what="the session gone",
    )
    caller.send_signal(signal.SIGKILL)
    caller.wait()
    eventually(
        lambda: not any(Path(f"/proc/{pid}").exists() for pid in processes),
        timeout=10,
        interval=0.02,
        what="the module and its command gone",
    )
    assert not late.exists()


def start_caller(shim: Path, program: bytes, session: Session, marker: Path) -> subprocess.Popen:
    """The shim running `program` in `session`, once the module wrote its pid to `marker`."""
    caller = subprocess.Popen(
        [str(shim)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        env={**os.environ, SESSION_ENV: str(session.address), "AO_PID": str(marker)},
    )
    assert caller.stdin is not None
    caller.stdin.write(program)
    caller.stdin.close()
    eventually(
        lambda: marker.exists() and marker.read_text(),
        timeout=20,
        interval=0.02,
        what="the module running",
    )
    return caller
