"""An operator in miniature for test_warm_zygote.py: it imports what the
operator imports, forks its warm runner before any thread as `ansible-operator
run` does, plays one role in it, prints what it saw as one JSON line, and
waits on stdin (the test kills it there, or lets it stop its warm runner).

    python zygote_operator.py WORK_DIR play|discard
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from pathlib import Path

from warm_play import play_warm, start_warm

import ansible_operator.manager.manager  # noqa: F401  (the operator's imports, shared)
from ansible_operator.observability import logs
from ansible_operator.runner.receiver import EventReceiver
from ansible_operator.runner.warm.zygote import WarmZygote


async def play(zygote: WarmZygote, work: Path) -> None:
    receiver = EventReceiver(work / "events" / "events.sock")
    await receiver.start()
    role = work / "roles" / "demo"
    warm = await start_warm(work / "scratch", {"role": str(role)}, zygote=zygote)
    result, run_dir = await play_warm(
        receiver, warm, work / "runs", role=role, extravars={"number": 21}
    )
    report = {
        "operator": os.getpid(),
        "warm_runner": warm.process.pid,
        "zygote": zygote.pid,
        "off": sorted(name for name, verdict in warm.accelerations.items() if not verdict.on),
        "succeeded": result.succeeded,
        "message": result.message,
        "stdout": (run_dir.artifacts / result.ident / "stdout").read_text(),
    }
    print(json.dumps(report), flush=True)
    await asyncio.to_thread(sys.stdin.readline)
    await warm.stop()
    await receiver.stop()
    print(json.dumps({"warm_runner_exit": warm.process.returncode}), flush=True)


def main() -> int:
    work, what = Path(sys.argv[1]), sys.argv[2]
    logs.configure(logging.DEBUG)  # as `run --zap-devel` does before its fork
    zygote = WarmZygote.fork()
    if zygote is None:
        print(json.dumps({"error": "no fork"}), flush=True)
        return 1
    if what == "discard":
        zygote.discard()
        print(json.dumps({"zygote": zygote.pid, "alive": Path(f"/proc/{zygote.pid}").exists()}))
        return 0
    try:
        asyncio.run(play(zygote, work))
    finally:
        zygote.discard()
    return 0


if __name__ == "__main__":
    sys.exit(main())
