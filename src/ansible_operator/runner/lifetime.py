"""Processes the operator starts end with it, SIGKILL included.

A run's ansible-runner, the warm runner and its module interpreter are the
operator's children; an operator killed with SIGKILL (the OOM killer, a Pod
deleted) cannot stop them, so each asks the kernel, as it starts, to be
killed when its parent dies (Linux's PR_SET_PDEATHSIG; elsewhere nothing).
"""

from __future__ import annotations

import contextlib
import ctypes
import signal

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """In a child, before anything else: SIGKILL when its parent dies."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
