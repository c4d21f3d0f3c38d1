"""The soft open-file limit is raised to the hard one, in a process of its own
(a limit lowered here would stay lowered for the rest of the suite)."""

from __future__ import annotations

import resource
import subprocess
import sys

from ansible_operator.serving.http_limits import NOFILE_WANTED


def test_the_soft_open_file_limit_is_raised_to_the_hard_one() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    low = min(256, soft)

    def lower_soft_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard))

    script = (
        "import resource\n"
        "from ansible_operator.serving.http_limits import raise_open_file_limit\n"
        "print(*raise_open_file_limit(), resource.getrlimit(resource.RLIMIT_NOFILE)[0])\n"
    )
    output = subprocess.run(
        [sys.executable, "-c", script],
        preexec_fn=lower_soft_limit,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    wanted = NOFILE_WANTED if hard == resource.RLIM_INFINITY else min(hard, NOFILE_WANTED)
    assert [int(n) for n in output] == [low, wanted, wanted]
