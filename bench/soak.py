"""Soak: many objects at once (500 by default) on one operator.

    .venv/bin/python bench/soak.py [--objects 500] [--workers 4] [--cap 2]
                                   [--modes warm,reference]

Creates the objects of bench/operator's Memcached-style kind at once, with
more workers than the global cap on runs (`--max-concurrent-runs`), and
reports: whether every object reached `Successful` for its generation, the
most Ansible runs seen in flight at once (from the operator's metrics,
sampled), the operator's own peak RSS and the peak memory (PSS) of its whole
tree, the makespan and the API requests per reconcile (the operator's own
count of what it and its runs sent to the API server), per mode, one mode
after the other. Runs gather no facts (ANSIBLE_GATHERING=explicit), as in
bench/reconcile.py. It exits non-zero if an object is lost or the cap was
exceeded.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
import uuid
from pathlib import Path

from kubernetes import client, config

from ansible_operator.cluster import provide
from ansible_operator.runner import proctree
from ansible_operator.testing.manifests import apply_manifests
from ansible_operator.testing.operator import OperatorProcess
from reconcile import (
    GROUP,
    HERE,
    PLURAL,
    VERSION,
    _memory_mib,
    _operator_requests,
    memcached,
    metric_total,
    metrics_url,
)


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def soak(kubeconfig: Path, api: client.ApiClient, args: argparse.Namespace, mode: str) -> bool:
    custom = client.CustomObjectsApi(api)
    namespace = f"soak-{uuid.uuid4().hex[:6]}"
    client.CoreV1Api(api).create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace))
    )
    operator = OperatorProcess(
        HERE / "watches.yaml",
        kubeconfig,
        log_path=Path(f"/tmp/ansible-operator-soak-{namespace}.log"),
        args=[
            f"--max-concurrent-reconciles={args.workers}",
            f"--max-concurrent-runs={args.cap}",
            f"--runner-mode={mode}",
            "--metrics-bind-address=127.0.0.1:0",
        ],
        env={"WATCH_NAMESPACE": namespace, "ANSIBLE_GATHERING": "explicit"},
    ).start()
    assert operator.process is not None
    root = operator.process.pid
    metrics = metrics_url(operator)
    peaks = {"rss": 0.0, "pss": 0.0, "runs": 0.0}
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.is_set():
            peaks["rss"] = max(peaks["rss"], _rss_mib(root))
            peaks["pss"] = max(peaks["pss"], _memory_mib(proctree.tree(root)))
            (in_flight,) = metric_total(metrics, "ansible_operator_runs_in_flight{")
            peaks["runs"] = max(peaks["runs"], in_flight)
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    requests_before, _ = _operator_requests(operator)
    requests = 0.0
    started = time.monotonic()
    try:
        for index in range(args.objects):
            custom.create_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, memcached(f"m-{index}", index)
            )
        done: set[str] = set()
        deadline = time.monotonic() + args.objects * 15
        while len(done) < args.objects and time.monotonic() < deadline:
            for item in custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)[
                "items"
            ]:
                status = item.get("status") or {}
                if status.get("observedGeneration") == item["metadata"]["generation"] and any(
                    c["type"] == "Successful" and c["status"] == "True"
                    for c in status.get("conditions") or []
                ):
                    done.add(item["metadata"]["name"])
            time.sleep(1)
        makespan = time.monotonic() - started
        requests = _operator_requests(operator)[0] - requests_before
    finally:
        sampling.set()
        sampler.join()
        operator.stop()
        client.CoreV1Api(api).delete_namespace(namespace)
    lost = args.objects - len(done)
    print(
        f"\n{args.objects} objects, {args.workers} workers, global cap {args.cap}, "
        f"{mode} mode\n"
        f"  Successful:            {len(done)}/{args.objects} (lost: {lost})\n"
        f"  most runs at once:     {peaks['runs']:.0f} (cap {args.cap})\n"
        f"  operator peak RSS:     {peaks['rss']:.0f} MiB\n"
        f"  whole tree peak PSS:   {peaks['pss']:.0f} MiB\n"
        f"  makespan:              {makespan:.0f} s\n"
        f"  API requests/reconcile: {requests / max(len(done), 1):.1f}"
    )
    return lost == 0 and peaks["runs"] <= args.cap


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=500)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--cap", type=int, default=2)
    parser.add_argument("--modes", default="warm", help="comma list of warm, reference")
    args = parser.parse_args()
    with (
        provide(progress=lambda m: print(m, file=sys.stderr)) as cluster,
        config.new_client_from_config(str(cluster.kubeconfig)) as api,
    ):
        apply_manifests(api, HERE / "crd.yaml")
        ok = [soak(cluster.kubeconfig, api, args, mode) for mode in args.modes.split(",")]
    sys.exit(0 if all(ok) else 1)


if __name__ == "__main__":
    main()
