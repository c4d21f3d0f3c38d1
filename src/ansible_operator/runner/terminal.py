"""`python -m ansible_operator.runner.terminal run ...`: ansible-runner's `run`
with its Ansible on this process's terminal (`reconcile --debugger`).

ansible-runner starts ansible-playbook on a pseudo-terminal of its own and reads
it in a loop of pexpect `expect` calls: what Ansible prints becomes the run's
events (they travel in Ansible's output, between escape marks) and its
artifacts; nothing reaches Ansible's standard input. Here the same run, with
the same arguments, inputs and event plugin, has that loop relay the terminal
too: what Ansible prints is shown as it comes (the event marks taken out: a
narrow terminal would show them), what is typed goes to Ansible, so a prompt
(its task debugger's) is answered by whoever sits at the terminal. Each of
the loop's `expect` calls relays for at most its timeout and answers as
pexpect would (a timeout, the end of the output), so ansible-runner's own
checks between them (cancel, timeouts) and everything after (events, status,
artifacts) are untouched. ansible-runner's own echo of the output is off
(`--quiet`): the relay shows it.

The terminal is raw while Ansible runs, as under `ssh`: Ansible's terminal
edits lines and echoes, Ctrl-C reaches Ansible; it is restored when the
run ends. Standard input that is not a terminal (a pipe) is relayed as it
is, and its end is an end-of-file for Ansible (the debugger quits).
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import sys
import termios
import tty
import types
from collections.abc import Iterator
from typing import Any

import pexpect

RELAY_SLICE = 0.5  # seconds: the longest an `expect` relays before ansible-runner checks again
READ_SIZE = 65536

# ansible-runner's event marks (its display callback's `dump`, its
# OutputEventFilter's EVENT_DATA_RE): ESC[K, base64 chunks each followed by
# ESC[<n>D, ESC[K.
_WHOLE_MARK = re.compile(r"\x1b\[K(?:[A-Za-z0-9+/=]+\x1b\[\d+D)+\x1b\[K")
_PARTIAL_MARK = re.compile(
    r"\x1b(?:\[(?:K(?:[A-Za-z0-9+/=]+\x1b\[\d+D)*[A-Za-z0-9+/=]*(?:\x1b(?:\[\d*)?)?)?)?"
)


class EventMarks:
    """Takes ansible-runner's event marks out of output that arrives in pieces:
    a piece may end inside a mark, which is held until the next shows what it is."""

    def __init__(self) -> None:
        self._held = ""

    def shown(self, text: str) -> str:
        text = self._held + text
        self._held = ""
        out: list[str] = []
        at = 0
        while True:
            start = text.find("\x1b", at)
            if start < 0:
                out.append(text[at:])
                break
            out.append(text[at:start])
            whole = _WHOLE_MARK.match(text, start)
            if whole:
                at = whole.end()
                continue
            partial = _PARTIAL_MARK.match(text, start)
            if partial and partial.end() == len(text):
                self._held = text[start:]  # a mark, or not: the next piece tells
                break
            # An escape of Ansible's own (colours): shown as it is.
            out.append(text[start : start + 1])
            at = start + 1
        return "".join(out)

    def rest(self) -> str:
        """What was held at the end of the output: not a mark after all."""
        held, self._held = self._held, ""
        return held


class TerminalSpawn(pexpect.spawn):
    """ansible-runner's child (`pexpect.spawn`), relaying this process's
    terminal in its `expect` calls."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.marks = EventMarks()
        self.stdin_fd: int | None = sys.stdin.fileno()
        self.stdout_fd = sys.stdout.fileno()
        # Ansible's terminal edits and echoes what is typed (ours is raw).
        self.setecho(True)
        size_to_terminal(self, self.stdin_fd)
        signal.signal(signal.SIGWINCH, lambda *_: size_to_terminal(self, self.stdin_fd))

    def expect(  # type: ignore[override]
        self, pattern: Any, timeout: float | None = -1, searchwindowsize: int | None = None,
        **_more: Any,
    ) -> int:  # fmt: skip
        """Relay for up to `timeout` (at most RELAY_SLICE); answer the index of
        TIMEOUT or EOF in `pattern` as pexpect would, or raise them when absent."""
        patterns = pattern if isinstance(pattern, list) else [pattern]
        if timeout == -1:
            timeout = self.timeout
        slice_ = RELAY_SLICE if timeout is None else min(timeout, RELAY_SLICE)
        if self.relay(slice_):
            if pexpect.EOF in patterns:
                return patterns.index(pexpect.EOF)
            raise pexpect.EOF("the run's output ended")
        if pexpect.TIMEOUT in patterns:
            return patterns.index(pexpect.TIMEOUT)
        raise pexpect.TIMEOUT("the run's output did not end in time")

    def relay(self, seconds: float) -> bool:
        """Copy Ansible's output to the terminal and the terminal's input to
        Ansible for `seconds`; True when Ansible's output ended."""
        if self.flag_eof:
            return True
        watched = [self.child_fd] + ([self.stdin_fd] if self.stdin_fd is not None else [])
        readable, _, _ = select.select(watched, [], [], seconds)
        if self.stdin_fd is not None and self.stdin_fd in readable:
            typed = os.read(self.stdin_fd, READ_SIZE)
            if typed:
                _write_all(self.child_fd, typed)
            else:  # a pipe ended: Ansible reads an end of file
                self.stdin_fd = None
                self.sendeof()
        if self.child_fd in readable:
            try:
                # Decoded and given to ansible-runner's reader (logfile_read) by pexpect.
                text = self.read_nonblocking(READ_SIZE, timeout=0)
            except pexpect.TIMEOUT:
                return False
            except pexpect.EOF:
                self._show(self.marks.rest())
                return True
            self._show(self.marks.shown(text))
        return False

    def _show(self, text: str) -> None:
        if text:
            _write_all(self.stdout_fd, text.encode("utf-8", "replace"))


def _write_all(fd: int, data: bytes) -> None:
    while data:
        try:
            written = os.write(fd, data)
        except BlockingIOError:
            select.select([], [fd], [])
            continue
        data = data[written:]


def size_to_terminal(child: pexpect.spawn, fd: int | None) -> None:
    """Ansible's terminal as wide and tall as ours."""
    if fd is None or not os.isatty(fd):
        return
    with contextlib.suppress(OSError):
        size = os.get_terminal_size(fd)
        child.setwinsize(size.lines, size.columns)


@contextlib.contextmanager
def raw_terminal(fd: int) -> Iterator[None]:
    """The terminal raw while the run lasts (when it is one), restored after."""
    if not os.isatty(fd):
        yield
        return
    saved = termios.tcgetattr(fd)
    tty.setraw(fd)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSAFLUSH, saved)


def _on_terminal_pexpect() -> types.ModuleType:
    """pexpect, as ansible-runner's runner module sees it, with its spawn relaying."""
    module = types.ModuleType("pexpect")
    module.__dict__.update(vars(pexpect))
    module.spawn = TerminalSpawn  # type: ignore[attr-defined]
    return module


def main(argv: list[str] | None = None) -> int:
    from ansible_runner import __main__ as runner_main
    from ansible_runner import runner as runner_module

    args = list(sys.argv[1:] if argv is None else argv)
    runner_module.pexpect = _on_terminal_pexpect()  # type: ignore[attr-defined]
    with raw_terminal(sys.stdin.fileno()):
        code = runner_main.main([*args, "--quiet"])
    return int(code or 0)


if __name__ == "__main__":
    sys.exit(main())
