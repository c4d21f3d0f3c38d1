"""Tasks of single-host batches run in the playbook's own process (acceleration
`task-inline`).

Ansible forks a `WorkerProcess` for every task of every host, and the fork and
the worker's set-up cost ~21 ms of CPU per task, a third of a simple task. An
operator's plays have one host (`localhost`), so nothing runs beside the
task: the worker is made as Ansible makes it (`StrategyBase._queue_task`, so
the strategy's bookkeeping is its own), then, instead of forking, its `_run`
is called here, given what the fork gave it:

- its own copies of what it mutates: the Task (`post_validate`, 2.21's
  `squash`), the Host (its `vars` and `groups` are blanked once the task is
  done) and the top level of the task's variables; a fresh copy of the
  context variables (2.19+ keeps the task's ambient context in them);
- its stdout and stderr: what a plugin prints there is kept apart (and, from
  2.19, reported as errant output, as a worker does), while the display of
  the result thread keeps the real ones;
- the queue: the Display of this thread sends through the strategy's
  `FinalQueue`, as a worker's does, so messages, callbacks and the result
  reach the strategy's result thread in the order the task made them and are
  rebuilt there against the original task, by the stock code; the result
  thread's own display stays direct;
- an answer to what it asks of the strategy: 2.21's `add_host` and
  `add_group` wait for the strategy's main thread, which is running the task,
  so they are answered by the asking thread while the task runs.

What the fork would also have contained: a plugin that raises past the task
executor or calls `sys.exit` fails its task (the stock run would end with "A
worker was found in a dead state"); KeyboardInterrupt still stops the play.
Batches of more than one host keep their forks, so hosts still run in
parallel; so does every task when this is switched off or its probe fails.
"""

from __future__ import annotations

import contextlib
import contextvars
import io
import os
import queue
import sys
import threading
import traceback
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ansible_operator.runner.warm.acceleration import (
    Acceleration,
    ForkCheck,
    Install,
    Phase,
    Unavailable,
    parameters_of,
    require,
    started_in_a_fork,
    used,
)

NAME = "task-inline"

# `.strategy`: set by a strategy's `_queue_task`, for the worker it is about to
# start, when its batch has one host (the worker then runs here).
_single_host_batch = threading.local()


# How this ansible-core's worker enters the task's ambient context around
# `_run`, as the probe saw `WorkerProcess.run` do it: "create" (2.21:
# TaskContext.create), "task" (2.19, 2.20: TaskContext(task)) or "none"
# (2.18). Found in the warm runner; its runs' forks inherit it.
_context_kind: str | None = None
CONTEXT_KINDS = ("create", "task", "none")


def probe() -> ForkCheck:
    from ansible.inventory.host import Host
    from ansible.playbook.task import Task
    from ansible.plugins.strategy import StrategyBase
    from ansible.utils.display import Display

    require(
        callable(getattr(StrategyBase, "_set_hosts_cache", None)),
        "StrategyBase has no _set_hosts_cache (the batch's hosts)",
    )
    require("exclude_parent" in parameters_of(Task.copy), "Task.copy takes no exclude_parent")
    require("vars" in Host("probe").__dict__, "Host keeps no vars in its __dict__")
    require(
        "_final_q" in Display().__dict__ and callable(getattr(Display, "set_queue", None)),
        "Display has no _final_q (the worker's queue) or set_queue",
    )
    _failure_sender()
    try:
        from ansible._internal import _rpc_host
    except ImportError:
        _rpc_host = None  # before 2.21 workers ask nothing of the strategy
    if _rpc_host is not None:
        require(
            callable(getattr(getattr(_rpc_host, "AsyncRPCOperation", None), "dispatch", None)),
            "the strategy's RPC requests (ansible._internal._rpc_host) have no dispatch",
        )
    return started_in_a_fork(_rehearse, _conclude)


def _conclude(found: str) -> None:
    require(found in CONTEXT_KINDS, found)
    global _context_kind
    _context_kind = found


def _rehearse() -> str:
    """In a fork: workers made by the stock `StrategyBase._queue_task` (its
    start noted, not forked), the context `WorkerProcess.run` enters around
    `_run`, then `_run` inline as `run_inline` runs it, with a TaskExecutor
    that returns at once, and one whose plugin ends its process. Returns
    the context's kind, or what is not as expected."""
    from ansible.executor.process import worker as worker_module
    from ansible.inventory.host import Host
    from ansible.playbook.task import Task

    try:
        kind = _context_entered_by_run(_queued_worker(_Queue(), Host("probe"), Task(), {}))
        queue, host, task_vars = _Queue(), Host("probe"), {"probe": True}
        host.vars = {"kept": True}
        worker = _queued_worker(queue, host, Task(), task_vars)
        require(
            worker._host is host
            and worker._task_vars is task_vars
            and worker._final_q is queue
            and isinstance(worker._task, Task),
            "WorkerProcess keeps no _host, _task, _task_vars or _final_q",
        )
        ran: list[object] = []
        _inline_with(worker, kind, lambda: ran.append(worker_module.current_worker))
        require(
            ran == [worker],
            "WorkerProcess._run no longer runs its TaskExecutor as worker.current_worker",
        )
        require(
            len(queue.results) == 1,
            "WorkerProcess._run no longer sends its result through send_task_result",
        )
        require(
            host.vars == {"kept": True} and worker._host is not host and worker._host.vars == {},
            "WorkerProcess._run no longer blanks its host's vars (its own copy's, inline)",
        )
        crashing = _queued_worker(queue, Host("probe"), Task(), {})

        def ends_its_process() -> None:
            raise SystemExit(3)

        _inline_with(crashing, kind, ends_its_process)
        require(len(queue.results) == 2, "a task whose plugin ends its process sends no result")
    except Unavailable as missing:
        return str(missing)
    return kind


class _Queue:
    """The strategy's FinalQueue: results noted, everything else dropped."""

    def __init__(self) -> None:
        self.results: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def send_task_result(self, *args: Any, **kwargs: Any) -> None:
        self.results.append((args, kwargs))

    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *_args, **_kwargs: None


class _Result(dict):  # type: ignore[type-arg]
    """A TaskExecutor's result in every release's form (a dict up to 2.20,
    what `_run` asks of 2.21's UnifiedTaskResult)."""

    ignore_errors = False
    ignore_unreachable = False

    def finalize_registered_values(self) -> None:
        pass


def _queued_worker(queue: _Queue, host: Any, task: Any, task_vars: dict[str, Any]) -> Any:
    """The worker the stock `_queue_task` makes and starts, for a strategy of
    one worker slot."""
    from ansible.executor.process.worker import WorkerProcess
    from ansible.parsing.dataloader import DataLoader
    from ansible.playbook.play_context import PlayContext
    from ansible.plugins.strategy import StrategyBase

    strategy = types.SimpleNamespace(
        _loader=DataLoader(),
        _variable_manager=None,
        _final_q=queue,
        _tqm=types.SimpleNamespace(send_callback=lambda *_args, **_kwargs: None),
        _workers=[None],
        _cur_worker=0,
        _queued_task_cache={},
        _pending_results=0,
        ALLOW_BASE_THROTTLING=False,
        _process_rpc_queue=lambda: None,
        _hosts_cache=[host.name],
    )
    started: list[Any] = []
    stock_start = WorkerProcess.start
    WorkerProcess.start = lambda worker: started.append(worker)  # type: ignore[method-assign]
    try:
        StrategyBase._queue_task(strategy, host, task, task_vars, PlayContext())  # type: ignore[arg-type]
    finally:
        WorkerProcess.start = stock_start  # type: ignore[method-assign]
    require(
        len(started) == 1 and isinstance(started[0], WorkerProcess),
        "StrategyBase._queue_task no longer starts a WorkerProcess",
    )
    require(
        strategy._pending_results == 1,
        "StrategyBase._queue_task no longer counts the pending result",
    )
    return started[0]


def _context_entered_by_run(worker: Any) -> str:
    """What `WorkerProcess.run` (in this fork: it detaches its stdio) enters
    around `_run`."""
    from ansible.utils.display import Display

    Display().set_queue = lambda _queue: None  # type: ignore[method-assign]
    seen: list[str] = []
    worker._run = lambda: seen.append(_current_context_kind(worker))
    worker.run()
    require(len(seen) == 1, "WorkerProcess.run no longer runs its _run")
    require(seen[0] in CONTEXT_KINDS, "WorkerProcess.run enters a TaskContext of a new form")
    return seen[0]


def _current_context_kind(worker: Any) -> str:
    try:
        from ansible._internal import _task
    except ImportError:
        return "none"
    current = _task.TaskContext.current(optional=True)
    if current is None:
        return "none"
    if getattr(current, "task", None) is not worker._task:
        return "other"
    return "create" if getattr(current, "host_name", None) == worker._host.name else "task"


def _inline_with(worker: Any, kind: str, executor_run: Callable[[], None]) -> None:
    """`run_inline`, the worker's TaskExecutor doing `executor_run`."""
    from ansible.executor.process import worker as worker_module

    class Executor:
        def __init__(self, *_args: Any, **_kwargs: Any) -> None:
            pass

        def run(self) -> _Result:
            executor_run()
            return _Result()

    stock = worker_module.TaskExecutor
    worker_module.TaskExecutor = Executor  # type: ignore[misc, assignment]
    try:
        contextvars.copy_context().run(
            run_inline, worker, types.SimpleNamespace(), kind, _failure_sender()
        )
    finally:
        worker_module.TaskExecutor = stock  # type: ignore[misc]


def install() -> None:
    """In the run's ansible-playbook, over worker-gc-freeze's `start`: a task
    run here has no fork to spare the collector's walk."""
    from ansible.executor.process.worker import WorkerProcess
    from ansible.plugins.strategy import StrategyBase

    stock_queue_task = StrategyBase._queue_task
    stock_start = WorkerProcess.start
    context_kind = _context_kind
    require(context_kind is not None, "not probed in this process")
    send_failure = _failure_sender()

    def _queue_task(self: Any, host: Any, task: Any, task_vars: Any, play_context: Any) -> Any:
        single_host = len(getattr(self, "_hosts_cache", None) or ()) == 1
        _single_host_batch.strategy = self if single_host else None
        try:
            return stock_queue_task(self, host, task, task_vars, play_context)
        finally:
            _single_host_batch.strategy = None

    def start(self: Any) -> Any:
        strategy = getattr(_single_host_batch, "strategy", None)
        if strategy is None:
            return stock_start(self)
        _single_host_batch.strategy = None
        used(NAME)
        contextvars.copy_context().run(run_inline, self, strategy, context_kind, send_failure)
        return None

    StrategyBase._queue_task = _queue_task  # type: ignore[method-assign]
    WorkerProcess.start = start  # type: ignore[method-assign]


def run_inline(
    worker: Any,
    strategy: Any,
    context_kind: str,
    send_failure: Callable[[Any, BaseException], None],
) -> None:
    """The worker's `_run`, here, as in its fork."""
    from ansible.executor.process import worker as worker_module

    worker._host = _own_host(worker._host)
    worker._task = worker._task.copy()
    worker._task_vars = dict(worker._task_vars)
    stdin = None
    if hasattr(worker, "_save_stdin"):  # 2.18: the TaskExecutor is given a stdin
        stdin = worker._new_stdin = Path(os.devnull).open()  # noqa: SIM115 (closed below)
    try:
        with (
            _own_stdio(),
            _display_through(worker._final_q),
            _requests_answered_at_once(strategy),
            _ambient(worker, context_kind),
        ):
            try:
                worker._run()
            except KeyboardInterrupt:
                raise
            except BaseException as crash:  # what would have ended the fork
                send_failure(worker, crash)
    finally:
        worker_module.current_worker = None
        if stdin is not None:
            stdin.close()
        # The loader counts the temporary files made since this worker was
        # made (WorkerProcess.__init__ starts the count): this task's.
        with contextlib.suppress(Exception):
            worker._loader.cleanup_all_tmp_files()


def _own_host(host: Any) -> Any:
    """A copy of the Host whose attributes the worker may replace (it blanks
    `vars` and `groups` when done): the same name, address and uuid."""
    duplicate = object.__new__(type(host))
    duplicate.__dict__.update(host.__dict__)
    return duplicate


@contextlib.contextmanager
def _ambient(worker: Any, kind: str) -> Iterator[None]:
    if kind == "none":
        yield
        return
    from ansible._internal import _task

    if kind == "create":
        entered = _task.TaskContext.create(
            task=worker._task, task_vars=worker._task_vars, host_name=worker._host.name
        )
    else:
        entered = _task.TaskContext(worker._task)
    with entered:
        yield


class _AnsweredAtOnce:
    """The strategy's queue of requests from its workers (2.21: `add_host`,
    `add_group`), while the thread that would answer them runs the task that
    asks: each is answered as it is asked, by the asking thread."""

    def put(self, request: Any, *_args: object, **_kwargs: object) -> None:
        request.dispatch()

    def get(self, *_args: object, **_kwargs: object) -> Any:
        raise queue.Empty


@contextlib.contextmanager
def _requests_answered_at_once(strategy: Any) -> Iterator[None]:
    waiting = getattr(strategy, "_rpc_queue", None)
    if waiting is None:  # before 2.21 workers ask nothing of the strategy
        yield
        return
    strategy._rpc_queue = _AnsweredAtOnce()
    try:
        yield
    finally:
        strategy._rpc_queue = waiting


class _ThisThreadQueue:
    """The worker's queue for the Display of the thread running the task only:
    the result thread, which displays what the queue brings, displays directly."""

    def __init__(self, queue: Any, thread: int) -> None:
        self._queue = queue
        self._thread = thread

    def __bool__(self) -> bool:
        return threading.get_ident() == self._thread

    def __getattr__(self, name: str) -> Any:
        return getattr(self._queue, name)


@contextlib.contextmanager
def _display_through(queue: Any) -> Iterator[None]:
    from ansible.utils.display import Display

    display = Display()
    before = display._final_q
    # The worker sets the queue itself (2.18 in `_run`); Display refuses it
    # outside a child process, and the routed queue is set already.
    display.set_queue = lambda _queue: None  # type: ignore[method-assign]
    display._final_q = _ThisThreadQueue(queue, threading.get_ident())
    try:
        yield
    finally:
        display._final_q = before
        del display.set_queue


class _ThisThreadStream:
    """sys.stdout or sys.stderr: what the task's thread writes is kept (the
    worker reports it as errant output, 2.19+); other threads write through."""

    def __init__(self, real: Any, thread: int) -> None:
        self._real = real
        self._thread = thread
        self._kept = io.StringIO()

    def _target(self) -> Any:
        return self._kept if threading.get_ident() == self._thread else self._real

    def write(self, text: str) -> int:
        return self._target().write(text)

    def flush(self) -> None:
        self._target().flush()

    def getvalue(self) -> str:
        return self._kept.getvalue()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


@contextlib.contextmanager
def _own_stdio() -> Iterator[None]:
    thread = threading.get_ident()
    real_out, real_err = sys.stdout, sys.stderr
    sys.stdout = _ThisThreadStream(real_out, thread)  # type: ignore[assignment]
    sys.stderr = _ThisThreadStream(real_err, thread)  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdout, sys.stderr = real_out, real_err


def _failure_sender() -> Callable[[Any, BaseException], None]:
    """How this ansible-core's worker sends a failed result for its task, in
    the form its own `_run` uses when the real result cannot be sent."""
    from ansible.errors import AnsibleError
    from ansible.executor.process import worker as worker_module

    def wrapped(crash: BaseException) -> AnsibleError:
        try:
            raise AnsibleError(f"the task's plugin ended its worker: {crash!r}") from crash
        except AnsibleError as error:
            return error

    unified = getattr(getattr(worker_module, "_task", None), "UnifiedTaskResult", None)
    if unified is not None and callable(getattr(unified, "create_from_action_exception", None)):

        def send_unified(worker: Any, crash: BaseException) -> None:
            result = unified.create_from_action_exception(wrapped(crash))
            result.finalize_registered_values()
            worker._final_q.send_task_result(worker._host, worker._task, result)

        return send_unified

    raw = getattr(worker_module, "_RawTaskResult", None)
    errors = getattr(worker_module, "_error_utils", None)
    if raw is not None:
        require(
            callable(getattr(errors, "result_dict_from_exception", None)),
            "ansible._internal._errors._error_utils.result_dict_from_exception is missing",
        )

        def send_raw(worker: Any, crash: BaseException) -> None:
            worker._final_q.send_task_result(
                raw(
                    host=worker._host,
                    task=worker._task,
                    return_data=errors.result_dict_from_exception(wrapped(crash)),
                    task_fields=worker._task.dump_attrs(),
                )
            )

        return send_raw

    from ansible.executor.task_result import TaskResult

    require(
        "task_fields" in parameters_of(TaskResult.__init__),
        "TaskResult takes no task_fields",
    )

    def send_dict(worker: Any, crash: BaseException) -> None:
        worker._final_q.send_task_result(
            worker._host.name,
            worker._task._uuid,
            {
                "failed": True,
                "msg": str(wrapped(crash)),
                "exception": "".join(traceback.format_exception(crash)),
            },
            task_fields=worker._task.dump_attrs(),
        )

    return send_dict


ACCELERATION = Acceleration(
    name=NAME,
    saves="a fork and a worker per task (~21 ms of CPU each): the tasks of a "
    "single-host batch run in the playbook's process",
    relies_on="StrategyBase._queue_task making a WorkerProcess and start()-ing it; "
    "WorkerProcess._run (its _task, _host, _task_vars, _final_q); Display._final_q; "
    "ansible._internal._task.TaskContext (2.19+)",
    probe=probe,
    installs=(Install(Phase.PLAYBOOK, lambda _context: install()),),
)
