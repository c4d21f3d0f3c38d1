"""Local control plane: cold build time, start-to-ready time and memory.

    .venv/bin/python bench/controlplane.py [--cold] [--starts N]

--cold builds into an empty binary cache and an empty Go build cache (the
module cache is kept: downloads are not build time), which takes minutes.
Without it the cached binary is used and the build line says so.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from ansible_operator.cluster import build
from ansible_operator.cluster.local import COMPONENTS, Binaries, LocalControlPlane


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def measure_build(cold: bool) -> tuple[Path, str]:
    if not cold:
        started = time.monotonic()
        binary = build.ensure_binary()
        return binary, f"cached binary ({time.monotonic() - started:.1f}s to resolve): {binary}"
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as gocache:
        os.environ[build.CACHE_ENV] = cache
        os.environ["GOCACHE"] = gocache
        started = time.monotonic()
        binary = build.ensure_binary()
        elapsed = time.monotonic() - started
        kept = Path(tempfile.mkdtemp()) / "controlplane"
        binary.rename(kept)
    del os.environ[build.CACHE_ENV], os.environ["GOCACHE"]
    size = kept.stat().st_size / 2**20
    return kept, f"cold build: {elapsed:.1f}s (binary {size:.0f} MiB)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cold", action="store_true", help="measure a cold build (minutes)")
    parser.add_argument("--starts", type=int, default=3, help="start/stop cycles to time")
    parser.add_argument(
        "--settle", type=float, default=5.0, help="seconds after ready before reading memory"
    )
    args = parser.parse_args()

    binary, build_line = measure_build(args.cold)
    print(build_line)

    ready_times, etcd_times, rss_rows = [], [], []
    for _ in range(args.starts):
        with tempfile.TemporaryDirectory() as state:
            plane = LocalControlPlane(Path(state), Binaries.multicall(binary))
            marks: dict[str, float] = {}
            started = time.monotonic()
            plane.start(progress=lambda m, marks=marks: marks.setdefault(m, time.monotonic()))
            ready_times.append(time.monotonic() - started)
            etcd_times.append(marks.get("starting kube-apiserver", started) - started)
            time.sleep(args.settle)
            assert plane.state is not None
            rss_rows.append({c: rss_mib(plane.state.pids[c]) for c in COMPONENTS})
            plane.stop()

    print(
        f"start to ready (/readyz 200), {args.starts} starts: "
        f"median {statistics.median(ready_times):.2f}s, "
        f"min {min(ready_times):.2f}s, max {max(ready_times):.2f}s "
        f"(etcd healthy after {statistics.median(etcd_times):.2f}s)"
    )
    print(f"resident memory {args.settle:.0f}s after ready (median of {args.starts}):")
    total = 0.0
    for component in COMPONENTS:
        value = statistics.median(row[component] for row in rss_rows)
        total += value
        print(f"  {component:<24} {value:7.1f} MiB")
    print(f"  {'total':<24} {total:7.1f} MiB")


if __name__ == "__main__":
    main()
