"""A run's modules one after another in one process of its session
(acceleration `modules-in-one-process`).

Each module of a run used to run in a fork of the run's session of the warm
module interpreter (../module_server.py): a fork, the pages it copies as the
module touches what it shares (~3,300 page faults for a kubernetes.core
module, half of its ~30 ms of CPU) and its exit, every task. With this on,
the session keeps one process, forked ahead, that runs the run's modules one
after another (../module_worker.py): pages one module copied are the next
one's already.

A module leaves state in its process that a fresh fork would not have.
Before the next module, `ProcessState` puts back what the fresh fork has:
- sys.modules as the session has them (what a payload imported is gone, and
  so are the package attributes naming it), sys.path, sys.argv, sys.meta_path,
  the path hooks and importer cache;
- every global of Ansible's modules, of the collections' and of the
  Kubernetes client's: bound to the same object again, and the lists, dicts
  and sets among them holding what they held (Ansible keeps a module's
  warnings and deprecations in such globals);
- the Kubernetes client's default configuration, the environment, the
  working directory, the locale, the temporary directory, the root logger's
  handlers and level; the warnings filters; no timer (a pending alarm) left;
  the atexit functions a module registered are run when it ends, as its exit
  would have run them;
- its stdio: the module's descriptors are closed as soon as it ends, so its
  caller reads their end as at the module's exit.
The process serves another module only after a module `KNOWN` to leave
nothing else behind, and only if it left nothing that cannot be put back
(`left_behind`: a thread, a child process, an open descriptor, a signal
handler, the umask, a resource limit, the default socket timeout). Else it
ends once it has answered and the session forks the next one; a module that
comes while the process is busy gets a fork of its own, as without this.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import locale
import logging
import os
import resource
import runpy
import signal
import socket
import sys
import tempfile
import threading
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ansible_operator.runner.warm.acceleration import (
    Acceleration,
    Context,
    ForkCheck,
    Install,
    Phase,
    require,
    started_in_a_fork,
)

NAME = "modules-in-one-process"
# Modules read and known to keep no state beyond what ProcessState puts back.
KNOWN = frozenset(
    {
        "ansible_collections.kubernetes.core.plugins.modules.k8s",
        "ansible_collections.kubernetes.core.plugins.modules.k8s_info",
    }
    | {
        f"ansible_collections.operator_sdk.util.plugins.modules.{name}"
        for name in (
            "k8s_status",
            "k8s_event",
            "requeue_after",
            "osdk_metric",
            "admission_response",
            "conversion_response",
        )
    }
)
# Whose module globals a module run may change, and ProcessState puts back.
WATCHED_PACKAGES = ("ansible", "ansible_collections", "kubernetes", "urllib3")
SYS_LISTS = ("path", "argv", "meta_path", "path_hooks")
TIMERS = (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF)
LIMITS = (resource.RLIMIT_NOFILE, resource.RLIMIT_NPROC, resource.RLIMIT_AS, resource.RLIMIT_CORE)
_on = False
_modules_run: list[str] = []  # the modules run by the current program (runpy.run_module)


def switched_on() -> bool:
    """In a run's session: whether its modules run in one process."""
    return _on


def _switch_on(_context: Context) -> None:
    global _on
    _on = True


def _watched(name: str) -> bool:
    return any(name == package or name.startswith(package + ".") for package in WATCHED_PACKAGES)


def _containers(namespace: dict[str, Any]) -> dict[str, Any]:
    """Shallow copies of the lists, dicts and sets among a module's globals."""
    return {
        name: value.copy()
        for name, value in namespace.items()
        if type(value) in (list, dict, set)  # not subclasses: their copy() may differ
    }


def _kubernetes_configuration() -> type | None:
    module = sys.modules.get("kubernetes.client.configuration")
    return getattr(module, "Configuration", None)


@dataclass
class ProcessState:
    """What a fresh fork of the session has, to be put back after each module."""

    modules: dict[str, types.ModuleType]
    globals_: list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]]
    sys_lists: dict[str, list[Any]]
    importer_cache: dict[str, Any]
    environ: dict[str, str]
    cwd: str
    locale_: str
    stdio: tuple[Any, Any, Any]
    stdio_fds: tuple[int, int, int]
    hooks: tuple[Any, Any]
    kubernetes_default: Any
    root_logger: tuple[list[logging.Handler], int]
    tempdir: str | None
    collecting: bool
    # Checked, not put back: what a module would leave only by doing
    # something ProcessState does not know how to undo.
    signals: dict[int, Any]
    limits: dict[int, tuple[int, int]]
    umask: int
    socket_timeout: float | None
    threads: set[int]
    descriptors: set[str] = field(default_factory=set)

    @classmethod
    def capture(cls) -> ProcessState:
        watched = [
            module
            for name, module in sys.modules.items()
            if _watched(name) and isinstance(module, types.ModuleType)
        ]
        configuration = _kubernetes_configuration()
        umask = os.umask(0)
        os.umask(umask)
        stdio_fds = tuple(os.dup(fd) for fd in (0, 1, 2))
        state = cls(
            modules=dict(sys.modules),
            globals_=[(vars(m), dict(vars(m)), _containers(vars(m))) for m in watched],
            sys_lists={name: list(getattr(sys, name)) for name in SYS_LISTS},
            importer_cache=dict(sys.path_importer_cache),
            environ=dict(os.environ),
            cwd=str(Path.cwd()),
            locale_=locale.setlocale(locale.LC_ALL),
            stdio=(sys.stdin, sys.stdout, sys.stderr),
            stdio_fds=stdio_fds,  # type: ignore[arg-type]
            hooks=(sys.excepthook, sys.displayhook),
            kubernetes_default=getattr(configuration, "_default", None),
            root_logger=(list(logging.root.handlers), logging.root.level),
            tempdir=tempfile.tempdir,
            collecting=gc.isenabled(),
            signals=_signal_handlers(),
            limits={limit: resource.getrlimit(limit) for limit in LIMITS},
            umask=umask,
            socket_timeout=socket.getdefaulttimeout(),
            threads={thread.ident or 0 for thread in threading.enumerate()},
        )
        state.descriptors = _descriptors()
        return state

    def restore_stdio(self) -> None:
        """The module's stdio closed (its caller reads their end), ours back."""
        for fd, kept in enumerate(self.stdio_fds):
            os.dup2(kept, fd)
        sys.stdin, sys.stdout, sys.stderr = self.stdio

    def restore(self) -> None:
        """Everything back as captured."""
        self.restore_stdio()
        for name in set(sys.modules) - set(self.modules):
            _unbind_from_package(name, sys.modules[name])
        sys.modules.clear()
        sys.modules.update(self.modules)
        for namespace, bindings, containers in self.globals_:
            for name in [name for name in namespace if name not in bindings]:
                del namespace[name]
            for name, value in bindings.items():
                if namespace.get(name, _MISSING) is not value:
                    namespace[name] = value
            for name, content in containers.items():
                _refill(bindings[name], content)
        for name, content in self.sys_lists.items():
            getattr(sys, name)[:] = content
        sys.path_importer_cache.clear()
        sys.path_importer_cache.update(self.importer_cache)
        os.environ.clear()
        os.environ.update(self.environ)
        os.chdir(self.cwd)
        tempfile.tempdir = self.tempdir
        locale.setlocale(locale.LC_ALL, self.locale_)
        sys.excepthook, sys.displayhook = self.hooks
        configuration = _kubernetes_configuration()
        if configuration is not None:
            configuration._default = self.kubernetes_default  # type: ignore[attr-defined]
        for timer in TIMERS:  # a module's pending alarm ends with its process
            signal.setitimer(timer, 0)
        logging.root.handlers[:] = self.root_logger[0]
        logging.root.setLevel(self.root_logger[1])
        (gc.enable if self.collecting else gc.disable)()

    def left_behind(self, open_now: set[int]) -> str:
        """What the module left that `restore` does not put back ("" if nothing);
        `open_now`: descriptors the worker holds for the module's caller."""
        threads = {thread.ident or 0 for thread in threading.enumerate()}
        if threads - self.threads:
            return "a thread"
        with contextlib.suppress(ChildProcessError):
            os.waitpid(-1, os.WNOHANG)
            return "a child process"
        if _descriptors() - {str(fd) for fd in open_now} != self.descriptors:
            return "an open file descriptor"
        if _signal_handlers() != self.signals:
            return "a signal handler"
        if {limit: resource.getrlimit(limit) for limit in LIMITS} != self.limits:
            return "a resource limit"
        umask = os.umask(self.umask)
        if umask != self.umask:
            return "the umask"
        if socket.getdefaulttimeout() != self.socket_timeout:
            return "the default socket timeout"
        return ""


_MISSING = object()


def _refill(container: Any, content: Any) -> None:
    """`container` (a list, dict or set) holding `content` again."""
    try:
        same = bool(container == content)
    except Exception:  # an element's own __eq__
        same = False
    if same:
        return
    container.clear()
    if isinstance(container, list):
        container.extend(content)
    else:
        container.update(content)


def _unbind_from_package(name: str, module: object) -> None:
    """A module imported by a run is no attribute of its package any more."""
    parent, _, child = name.rpartition(".")
    holder = sys.modules.get(parent)
    if holder is not None and getattr(holder, child, None) is module:
        with contextlib.suppress(AttributeError):
            delattr(holder, child)


def _signal_handlers() -> dict[int, Any]:
    handlers = {}
    for number in signal.valid_signals():
        with contextlib.suppress(OSError, ValueError):
            handlers[int(number)] = signal.getsignal(number)
    return handlers


def _descriptors() -> set[str]:
    """This process's open descriptors, but those reading the listing."""
    listing = f"/proc/{os.getpid()}/fd"
    try:
        names = os.listdir(listing)  # noqa: PTH208 (the names are what is compared)
    except OSError:
        return {"unknown"}  # never equal to a later reading: nothing is served twice
    found = set()
    for name in names:
        with contextlib.suppress(OSError):  # gone: the listing's own
            if str(Path(listing, name).readlink()) != listing:
                found.add(name)
    return found


def forget_exit_functions() -> None:
    """Before the first module: what the process registered to run at its exit
    (logging's shutdown, concurrent.futures' and multiprocessing's, ...) is
    not the modules' to run. This process ends with os._exit, as a fork of the
    session does: they would never have run."""
    atexit._clear()


def run_atexit_functions() -> None:
    """What a module registered to run at its exit, run now (and forgotten)."""
    with contextlib.suppress(Exception):
        atexit._run_exitfuncs()
    atexit._clear()


def record_modules_run() -> None:
    """In the process that serves modules: note each module a program runs
    (Ansible's payload wrapper runs it with runpy.run_module)."""
    run_module = runpy.run_module

    def noted_run_module(*args: Any, **kwargs: Any) -> Any:
        _modules_run.append(str(kwargs.get("mod_name", args[0] if args else "")))
        return run_module(*args, **kwargs)

    runpy.run_module = noted_run_module  # type: ignore[assignment]


def start_program() -> None:
    _modules_run.clear()


def program_ran_known_modules() -> bool:
    return bool(_modules_run) and all(name in KNOWN for name in _modules_run)


# ----- the probe: two programs in one process, the second sees none of the first --
PROBE_FIRST = """
import atexit, os, sys
from ansible.module_utils.common import warnings
import kubernetes.client
warnings.warn("left behind")
os.environ["ANSIBLE_OPERATOR_PROBE"] = "left behind"
sys.path.insert(0, "/left/behind")
kubernetes.client.Configuration.set_default(kubernetes.client.Configuration(host="http://left.behind"))
atexit.register(lambda: print("exit function ran"))
print("first")
sys.exit(3)
"""
PROBE_SECOND = """
import os, sys
from ansible.module_utils.common import warnings
import kubernetes.client
print(repr((
    list(warnings.get_warning_messages()),
    os.environ.get("ANSIBLE_OPERATOR_PROBE"),
    "/left/behind" in sys.path,
    kubernetes.client.Configuration.get_default_copy().host,
)))
"""


def probe() -> ForkCheck:
    require(
        callable(getattr(atexit, "_run_exitfuncs", None))
        and callable(getattr(atexit, "_clear", None)),
        "atexit has no _run_exitfuncs and _clear",
    )

    def conclusion(found: str) -> None:
        require(not found, found)

    return started_in_a_fork(_rehearse, conclusion)


def _rehearse() -> str:
    import kubernetes.client
    from ansible.module_utils.common import warnings  # noqa: F401 (watched from now)

    from ansible_operator.runner.warm.module_run import run_program

    pristine = kubernetes.client.Configuration.get_default_copy().host
    forget_exit_functions()  # as the worker does before it captures (this is a fork)
    gc.collect()  # and after each module
    state = ProcessState.capture()
    outputs = []
    for program in (PROBE_FIRST, PROBE_SECOND):
        outputs.append(_run_in_pipes(run_program, program))
        state.restore()
        gc.collect()
    first, second = outputs
    if first != (3, "first\nexit function ran\n"):
        return f"a program run here did not answer as under Python: {first!r}"
    expected = repr(([], None, False, pristine))
    if second != (0, expected + "\n"):
        return f"a second program found what the first left behind: {second[1]!r}"
    return ""


def _run_in_pipes(run: Callable[[dict[str, object]], int], program: str) -> tuple[int, str]:
    """`program` run here on stdin, as a pipelined module is: its exit code and
    output (what it writes to stderr is dropped)."""
    stdin_read, stdin_write = os.pipe()
    stdout_read, stdout_write = os.pipe()
    os.write(stdin_write, program.encode())
    os.close(stdin_write)
    null = os.open(os.devnull, os.O_WRONLY)
    saved = [os.dup(fd) for fd in (0, 1, 2)]
    for fd, replacement in enumerate((stdin_read, stdout_write, null)):
        os.dup2(replacement, fd)
        os.close(replacement)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
    try:
        code = run({"argv": []})
        run_atexit_functions()
        sys.stdout.flush()
    finally:
        for fd, kept in enumerate(saved):
            os.dup2(kept, fd)
            os.close(kept)
    with os.fdopen(stdout_read) as output:
        return code, output.read()


ACCELERATION = Acceleration(
    name=NAME,
    saves="~20 ms of CPU per kubernetes.core task after the first of a run: a run's modules "
    "run one after another in one process of its session, not each in a fork of its own",
    relies_on="atexit._run_exitfuncs and atexit._clear; Ansible keeping a module's warnings "
    "in module globals; kubernetes.client.Configuration keeping its default in _default; "
    "Ansible's payload wrapper running the module with runpy.run_module",
    probe=probe,
    installs=(Install(Phase.MODULE_SERVER, _switch_on),),
)
