"""Build what the test tiers will need, in the background of `./dev test` (its tiers run
meanwhile, each waiting, under the same locks, for a build it needs that is not done):
the local control plane, the Go tools under tools/, and, where a node can run (root), the
images the node tier runs. On a fresh machine these are minutes of Go and apt-get; started
here they overlap with the tiers that need none of them.

    python scripts/prebuild.py        (from the repository, in .venv)

Prints what it builds and how long each took; a failure is reported and left for the
tier that needs the thing to report again (with its own message).
"""

from __future__ import annotations

import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def step(name: str, build: Callable[[], object]) -> None:
    started = time.monotonic()
    try:
        build()
    except BaseException:  # pytest.skip (no Go) is one too: the tier says so again
        print(f"prebuild: {name}: failed\n{traceback.format_exc()}", flush=True)
        return
    print(f"prebuild: {name}: {time.monotonic() - started:.0f}s", flush=True)


def main() -> int:
    from ansible_operator.cluster.build import ensure_binary
    from ansible_operator.cluster.node import node_unavailable_reason

    step("control plane", lambda: ensure_binary(progress=lambda _: None))
    sys.path.insert(0, str(ROOT / "tests"))
    from go_tools import built

    for tool in ("kstatus-check", "bundle-validate"):
        step(f"tools/{tool}", lambda tool=tool: built(tool))
    reason = node_unavailable_reason()
    if reason:
        print(f"prebuild: no node images ({reason})", flush=True)
        return 0
    from ansible_operator.cluster import host
    from ansible_operator.cluster.images import FLAVOURS, ImageBuilder

    # What the node and its images need from Debian, as the node's start installs it.
    step(
        "Debian packages",
        lambda: host.ensure_packages({**host.NODE_PACKAGES, **host.IMAGE_PACKAGES}, print),
    )
    images = ImageBuilder(progress=lambda _: None)
    step("image pause", images.pause)
    step("image python", images.test_python)
    for flavour in FLAVOURS:
        step(f"image {flavour.tag('operator')}", lambda flavour=flavour: images.operator(flavour))
    step("image samples", images.samples)
    step("image memcached", images.memcached)
    return 0


if __name__ == "__main__":
    sys.exit(main())
