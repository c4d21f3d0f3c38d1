"""py-spy's raw (collapsed) stacks of an operator and its Ansible processes,
sorted into where the CPU went: which process, doing what.

A sample is one line `process A:"cmd";process B:"cmd";frame;frame;... COUNT`
(`py-spy record --subprocesses -f raw`). Processes are told apart by their
frames, not by pid or command line: the warm runner's forks all share its
command line, and a fork keeps its parent's stack below its own frames, so
the innermost frame that marks a process says which process the sample is
from (a task worker's stack still holds the strategy frames that forked it).

py-spy counts a thread blocked in a system call (recv, poll, sleep) as busy;
such samples are dropped: the leaf frame's source line is a blocking call.
"""

from __future__ import annotations

import linecache
import re
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

FRAME = re.compile(r"^(?P<function>.*) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")
PROCESS = re.compile(r'^process \d+:"(?P<command>.*)"$')

# A leaf frame whose line is one of these calls is a thread waiting, not working.
BLOCKING_CALL = re.compile(
    r"\b(sleep|select|poll|accept|_accept|recv|recv_into|recvmsg|recv_bytes|recvfrom|"
    r"waitpid|wait4|acquire)\s*\(|\bos\.read\(|queue\.get\("
)
# The same, by function, where py-spy's file name does not lead to the source
# (frozen modules, files of a collection or a temporary directory).
BLOCKING_FUNCTION = re.compile(
    r"^(Connection\._recv|socket\.accept|socket\.recv\w*|\w*Selector\.select|select|"
    r"time\.sleep|Thread\.join|_wait_for_tstate_lock|Condition\.wait|Event\.wait|waitpid|"
    r"_try_wait|Popen\._wait|SimpleQueue\.get|poll_ignore_interrupts|_watch_connection|"
    r"_exit_when_shim_goes|StrategyBase\._wait_on_pending_results|serve_forks)$"
)

OPERATOR, RUNNER, PLAYBOOK, WORKER, MODULE = (
    "operator",
    "ansible-runner",
    "ansible-playbook",
    "task workers",
    "modules",
)
PROCESSES = (OPERATOR, RUNNER, PLAYBOOK, WORKER, MODULE)
UNATTRIBUTED = "unattributed"

# Innermost match wins. A thread's stack starts at Thread._bootstrap, without
# its process's frames: its own function names the process.
PROCESS_MARKERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        MODULE,
        re.compile(
            r"^(_ansiballz_main|invoke_module|_start_module_server|_run_child"
            r"|_exit_when_shim_goes) |\(AnsiballZ_|module_server\.py"
        ),
    ),
    (WORKER, re.compile(r"^(BaseProcess\._bootstrap|WorkerProcess\.run) ")),
    (
        PLAYBOOK,
        re.compile(r"^(_playbook_here|CLI\.cli_executor|results_thread_main) |\(ansible-playbook:"),
    ),
    (
        RUNNER,
        # Its display callback runs in ansible-playbook, not in ansible-runner.
        re.compile(
            r"\(ansible_runner/(?!display_callback/)|\(ansible-runner:"
            r"|\(ansible_operator/runner/warm/run_server"
        ),
    ),
    (RUNNER, re.compile(r"^_watch_connection ")),
)
COMMAND_MARKERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (MODULE, re.compile(r"AnsiballZ_|/ansible-tmp-|warm-runner/python")),
    (PLAYBOOK, re.compile(r"/ansible-playbook\b")),
    (RUNNER, re.compile(r"\bansible_runner\b|/ansible-runner\b")),
)

# Per process, what it was doing: the first pattern found anywhere in the stack.
ACTIVITIES: dict[str, tuple[tuple[str, str], ...]] = {
    OPERATOR: (
        ("event receiver", r"ansible_operator/runner/receiver\.py"),
        ("proxy", r"ansible_operator/proxy/"),
        (
            "containment, redaction threads",
            r"containment\.py|redaction\.py|cgroups\.py|^_finish \(|Containment\.",
        ),
        (
            "runs: run dir, access, start, end",
            r"ansible_operator/runner/(run|rundir|access|process)\.py",
        ),
        ("controller, status writes", r"ansible_operator/(controller|kube)/|kubernetes/client"),
        # Socket I/O under no handler of ours: which server it serves is not on the stack.
        ("HTTP I/O (receiver, proxy)", r"\(aiohttp/|selector_events\.py|sslproto\.py"),
    ),
    RUNNER: (
        ("event plugin POSTs", r"event_plugin\.py"),
        ("imports", r"^_find_and_load "),
        ("pexpect spawn and loop", r"\((pexpect|ptyprocess)/"),
        ("warm runner: serve, fork", r"^(serve|serve_forks|_handle) \(|forkserver\.py"),
    ),
    PLAYBOOK: (
        ("load callbacks", r"^\S*load_callbacks "),
        (
            "callbacks on events, display callback",
            r"^\S*send_callback |\(ansible_runner/display_callback/",
        ),
        # With task-inline the task itself runs here: its action, templating and handoff.
        ("queue task (and run it inline), fork worker", r"^StrategyBase\._queue_task "),
        (
            "results",
            r"^(StrategyBase\._process_pending_results|StrategyBase\._wait_on_pending_results"
            r"|results_thread_main) ",
        ),
        ("variables (get_vars)", r"^VariableManager\.get_vars "),
        (
            "playbook/role parse",
            r"^(Playbook\.load|Playbook\._load_playbook_data|load_list_of_\w+|Role\.load|"
            r"Play\.load|Play\.compile|Role\.compile|Block\.load) ",
        ),
        # Before the playbook executor starts: the command line, imports, inventory.
        ("CLI, imports, inventory", r"\A(?![\s\S]*^PlaybookExecutor\.run )"),
    ),
    WORKER: (
        (
            "module exec wait",
            r"^\S*(_low_level_execute_command|exec_command|_communicate) ",
        ),
        (
            "payload build",
            r"^\S*(_configure_module|modify_module|_find_module_utils|recursive_finder"
            r"|_build_\w+|_make_\w+module\w*) |ansiballz",
        ),
        (
            "result processing",
            r"^\S*(send_task_result|_parse_returned_data|_clean_res|_remove_internal_keys"
            r"|create_and_record) ",
        ),
        ("temporary directory", r"local_tmp\.py|^\S*(_make_tmp_path|_remove_tmp_path) "),
        (
            "plugin, connection look-up",
            r"^TaskExecutor\.(_get_action_handler\w*|_get_connection) ",
        ),
        ("templating", r"[Tt]empla|jinja2/|post_validate"),
    ),
    MODULE: (
        (
            "kubernetes client, discovery",
            r"get_api_client|DynamicClient|[Dd]iscover|"
            r"create_configuration|load_kube_config|K8SClient|kubernetes/config/",
        ),
        ("HTTP", r"\((urllib3|http/client|ssl|socket)\b|http\.client|\brest\.py"),
        ("imports", r"^(_find_and_load|zipimporter\.\w+|_LoaderBasics\.exec_module) "),
        (
            "server loop, fork",
            r"\A(?![\s\S]*^(_run_child|invoke_module|_ansiballz_main) )"
            r"[\s\S]*^_start_module_server ",
        ),
    ),
}
OTHER = "other"
NO_FRAME = "no Python frame (interpreter start, exit)"


@dataclass(frozen=True)
class Sample:
    commands: tuple[str, ...]  # the command lines of its processes, outermost first
    frames: tuple[str, ...]  # `function (file:line)`, outermost first
    count: int


def parse(lines: Iterable[str]) -> list[Sample]:
    samples = []
    for line in lines:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not stack or not count.isdigit():
            continue
        commands, frames = [], []
        for part in _frames(stack):
            process = PROCESS.match(part)
            if process:
                commands.append(process["command"])
            else:
                frames.append(part)
        samples.append(Sample(tuple(commands), tuple(frames), int(count)))
    return samples


def _frames(stack: str) -> list[str]:
    """Split on `;`, keeping a command line that itself holds `;` in one piece."""
    parts: list[str] = []
    for piece in stack.split(";"):
        if parts and parts[-1].startswith("process ") and not parts[-1].endswith('"'):
            parts[-1] += ";" + piece
        else:
            parts.append(piece)
    return parts


@cache
def _source_file(name: str) -> Path | None:
    """py-spy names a file relative to the sys.path entry it came from."""
    path = Path(name)
    if path.is_absolute():
        return path if path.is_file() else None
    for entry in sys.path:
        candidate = Path(entry or ".") / path
        if candidate.is_file():
            return candidate
    return None


@cache
def is_blocked(leaf: str) -> bool:
    """The thread was waiting in a system call at this frame."""
    match = FRAME.match(leaf)
    if not match:
        return False
    if BLOCKING_FUNCTION.match(match["function"]):
        return True
    source = _source_file(match["file"]) if match["line"] else None
    if source is None:
        return False
    return bool(BLOCKING_CALL.search(linecache.getline(str(source), int(match["line"]))))


def process_of(sample: Sample) -> str:
    for frame in reversed(sample.frames):
        for process, marker in PROCESS_MARKERS:
            if marker.search(frame):
                return process
    # No frame says (an interpreter starting or exiting, a thread of its own):
    # a process exec'd under its own name still says by its command line.
    command = sample.commands[-1] if sample.commands else ""
    for process, marker in COMMAND_MARKERS:
        if marker.search(command):
            return process
    if len(sample.commands) == 1:
        return OPERATOR
    return UNATTRIBUTED


@cache
def _activity_patterns(process: str) -> tuple[tuple[str, re.Pattern[str]], ...]:
    return tuple(
        (name, re.compile(pattern, re.MULTILINE)) for name, pattern in ACTIVITIES.get(process, ())
    )


def activity_of(process: str, sample: Sample) -> str:
    if process == MODULE and "warm-runner/python" in (sample.commands or ("",))[-1]:
        return "shim (start, relay)"
    if not sample.frames:
        return NO_FRAME
    # One frame a line: `^` anchors a pattern at a frame's start.
    stack = "\n".join(sample.frames)
    for name, pattern in _activity_patterns(process):
        if pattern.search(stack):
            return name
    return OTHER


@dataclass
class Profile:
    """Samples per (process, activity), and the blocked ones left out."""

    by_activity: Counter[tuple[str, str]]
    blocked: int
    total: int


def classify(samples: Iterable[Sample]) -> Profile:
    by_activity: Counter[tuple[str, str]] = Counter()
    blocked = total = 0
    for sample in samples:
        total += sample.count
        if sample.frames and is_blocked(sample.frames[-1]):
            blocked += sample.count
            continue
        process = process_of(sample)
        by_activity[process, activity_of(process, sample)] += sample.count
    return Profile(by_activity, blocked, total)


def read_profile(path: Path) -> Profile:
    with path.open(errors="replace") as lines:
        return classify(parse(lines))
