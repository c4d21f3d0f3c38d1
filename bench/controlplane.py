"""Local control plane: cold build time, start-to-ready time and memory.

    .venv/bin/python bench/controlplane.py [--cold] [--starts N] [--node]

--cold builds into an empty binary cache and an empty Go build cache (the
module cache is kept: downloads are not build time), which takes minutes.
Without it the cached binary is used and the build line says so.

--node (root) adds the local node: start to Ready (containerd, image import,
kubelet, the not-ready taint lifted), Pod start latency (created to Running and
to Ready), the memory of kubelet, containerd, each containerd shim and the
components a node adds, and the time to stop it all (`cluster down`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from kubernetes import client, config

from ansible_operator.cluster import build
from ansible_operator.cluster.images import ImageBuilder
from ansible_operator.cluster.local import COMPONENTS, Binaries, LocalControlPlane
from ansible_operator.cluster.node import (
    CONTAINERD_SOCKET,
    LocalNode,
    NodeRecord,
    node_unavailable_reason,
)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def shim_pids() -> list[int]:
    """containerd-shim-runc-v2 processes of the node's containerd (one per Pod)."""
    pids = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[0].endswith(b"containerd-shim-runc-v2") and str(CONTAINERD_SOCKET).encode() in argv:
            pids.append(int(proc.name))
    return pids


def pod_running_and_ready(core: client.CoreV1Api, name: str) -> tuple[float, float]:
    """Seconds from create to phase Running and to condition Ready."""
    image = ImageBuilder().test_python()
    body = {
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {"name": "main", "image": image.name,
                 "command": ["python3", "-c", "import time; time.sleep(3600)"]}
            ],
        },
    }  # fmt: skip
    started = time.monotonic()
    core.create_namespaced_pod("default", body)
    running = ready = 0.0
    while not ready:
        pod = core.read_namespaced_pod(name, "default")
        if pod.status.phase == "Running" and not running:
            running = time.monotonic() - started
        if any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or []):
            ready = time.monotonic() - started
        time.sleep(0.02)
    return running, ready


def measure_node(binary: Path, starts: int, pods: int, settle: float) -> None:
    reason = node_unavailable_reason()
    if reason:
        print(f"node: not measured ({reason})")
        return
    builder = ImageBuilder()
    started = time.monotonic()
    builder.pause()
    python = builder.test_python()
    print(f"node images (pause, python) resolved in {time.monotonic() - started:.1f}s")
    to_ready, kubelet_to_ready, stop_times, pod_rows, rss_rows = [], [], [], [], []
    for round_ in range(starts):
        with tempfile.TemporaryDirectory() as state:
            plane = LocalControlPlane(Path(state), Binaries.multicall(binary), node=True)
            plane.start()
            node = LocalNode(plane, builder)
            marks: dict[str, float] = {}
            started = time.monotonic()
            node.start(
                images=[python],
                progress=lambda m, marks=marks: marks.setdefault(m, time.monotonic()),
            )
            to_ready.append(time.monotonic() - started)
            kubelet = next(t for m, t in marks.items() if m.startswith("starting kubelet"))
            kubelet_to_ready.append(time.monotonic() - kubelet)
            api = config.new_client_from_config(str(plane.kubeconfig))
            core = client.CoreV1Api(api)
            while not any(a.metadata.name == "default" for a in
                          core.list_namespaced_service_account("default").items):  # fmt: skip
                time.sleep(0.05)
            pod_rows += [pod_running_and_ready(core, f"p{round_}-{i}") for i in range(pods)]
            time.sleep(settle)
            record = NodeRecord.load()
            assert record is not None and plane.state is not None
            row = {name: rss_mib(pid) for name, pid in record.pids.items()}
            row["kube-scheduler"] = rss_mib(plane.state.pids["kube-scheduler"])
            row["kube-controller-manager"] = rss_mib(plane.state.pids["kube-controller-manager"])
            shims = [rss_mib(pid) for pid in shim_pids()]
            row["shim (each)"] = statistics.median(shims) if shims else 0.0
            row["shims"] = float(len(shims))
            rss_rows.append(row)
            api.close()
            started = time.monotonic()
            node.stop()
            plane.stop()
            stop_times.append(time.monotonic() - started)
    print(
        f"node start to Ready (containerd, images present, kubelet, taint lifted), "
        f"{starts} starts: median {statistics.median(to_ready):.2f}s, "
        f"min {min(to_ready):.2f}s, max {max(to_ready):.2f}s "
        f"(kubelet start to Ready {statistics.median(kubelet_to_ready):.2f}s)"
    )
    running = [row[0] for row in pod_rows]
    ready = [row[1] for row in pod_rows]
    print(
        f"Pod start, {len(pod_rows)} Pods one at a time: created to Running median "
        f"{statistics.median(running):.2f}s (max {max(running):.2f}s), to Ready median "
        f"{statistics.median(ready):.2f}s (max {max(ready):.2f}s)"
    )
    print(f"resident memory with {pods} Pods, {settle:.0f}s after (median of {starts}):")
    for name in ("kubelet", "containerd", "shim (each)", "kube-scheduler",
                 "kube-controller-manager"):  # fmt: skip
        value = statistics.median(row[name] for row in rss_rows)
        print(f"  {name:<24} {value:7.1f} MiB")
    print(f"  ({statistics.median(row['shims'] for row in rss_rows):.0f} shims: one per Pod)")
    print(
        f"cluster down with the node and {pods} Pods: median {statistics.median(stop_times):.2f}s "
        f"(max {max(stop_times):.2f}s)"
    )


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
    parser.add_argument("--node", action="store_true", help="also measure the local node (root)")
    parser.add_argument("--pods", type=int, default=4, help="Pods started per node start")
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
    if args.node:
        measure_node(binary, args.starts, args.pods, args.settle)


if __name__ == "__main__":
    main()
