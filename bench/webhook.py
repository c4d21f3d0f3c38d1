"""Latency an admission webhook written in Ansible adds to the API path, beside a stock one.

    .venv/bin/python bench/webhook.py [--requests 40] [--concurrency 1,10] [--reconciles 0,4]

Starts a local control plane (or uses KUBECONFIG) and `ansible-operator run` serving one
mutating webhook whose role has three tasks (compute a label, check the object, answer with
the changed object), and, in this process, a trivial aiohttp webhook doing the same change in
Python. ConfigMaps are created (server-side dry run: nothing is stored) through the API
server, as kubectl creates them, each labelled for one webhook or for none, at each
concurrency. Prints p50 and p99 of the whole create, in milliseconds.

With N reconciles running (`--reconciles`, a comma list): N objects of a kind whose role keeps
a core busy for seconds and asks to run again at once, so N reconcile runs compete with the
admission runs for the CPU; measured twice, with reconcile runs yielding the CPU (the default
`--reconcile-run-nice=10`) and without (`0`), each by an operator of its own, side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import re
import ssl
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web
from kubernetes.config import new_client_from_config as ApiSync

from ansible_operator.cluster import provide
from ansible_operator.kube.client import ApiClient, ApiError
from ansible_operator.kube.config import KubeConfig, load_config
from ansible_operator.kube.types import Resource
from ansible_operator.serving import pki
from ansible_operator.testing.manifests import apply_manifests, schemaless_crd
from ansible_operator.testing.operator import OperatorProcess

CONFIGMAPS = Resource("", "v1", "ConfigMap", "configmaps", True)
MUTATING = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "MutatingWebhookConfiguration",
    "mutatingwebhookconfigurations",
    False,
)
LABEL = "bench.ansible-operator.io/webhook"
ROLE = """
- name: compute the label
  set_fact:
    marked: >-
      {{ admission.object | combine({'metadata': {'labels': {'checked': 'yes'}}}, recursive=True) }}
- name: check the object
  assert:
    that: admission.operation == 'CREATE'
- name: answer with the changed object
  operator_sdk.util.admission_response:
    object: "{{ marked }}"
"""
BUSY_GROUP = "bench.ansible-operator.io"
BUSY = Resource(BUSY_GROUP, "v1", "Busy", "busies", True)
# A reconcile that keeps a core busy for about two seconds, then asks to run again at once.
BUSY_ROLE = """
- name: keep a core busy
  command:
    argv: [python3, -c, "import time\\nend = time.time() + 2\\nwhile time.time() < end: pass"]
  changed_when: false
- name: run again at once
  operator_sdk.util.requeue_after:
    time: 1s
"""
WATCHES = f"""
- version: v1
  group: {BUSY_GROUP}
  kind: Busy
  role: busy
  manageStatus: false
- webhook:
    name: ansible.bench.ansible-operator.io
    type: mutating
    rules:
      - {{apiGroups: [""], apiVersions: [v1], resources: [configmaps], operations: [CREATE]}}
    objectSelector: {{matchLabels: {{{LABEL}: ansible}}}}
    role: bench
    timeoutSeconds: 30
"""


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def stock_webhook(scratch: Path) -> tuple[web.AppRunner, int, bytes]:
    """The comparison: the same change, in Python, answered at once."""

    async def mutate(request: web.Request) -> web.Response:
        review = await request.json()
        patch = [{"op": "add", "path": "/metadata/labels/checked", "value": "yes"}]
        response = {
            "uid": review["request"]["uid"],
            "allowed": True,
            "patchType": "JSONPatch",
            "patch": base64.b64encode(json.dumps(patch).encode()).decode(),
        }
        return web.json_response(
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
        )

    ca = pki.create_ca(scratch / "stock", "bench-stock-ca")
    pair = pki.issue_server_cert(ca, scratch / "stock", "serving", ["127.0.0.1"], "127.0.0.1")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(pair.cert_path, pair.key_path)
    app = web.Application()
    app.router.add_post("/mutate", mutate)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, port, ca.cert_pem()


def stock_configuration(name: str, port: int, ca: bytes) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": "stock.bench.ansible-operator.io",
                "clientConfig": {
                    "url": f"https://127.0.0.1:{port}/mutate",
                    "caBundle": base64.b64encode(ca).decode(),
                },
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "resources": ["configmaps"],
                        "operations": ["CREATE"],
                    }
                ],
                "objectSelector": {"matchLabels": {LABEL: "stock"}},
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 30,
            }
        ],
    }


async def create(api: ApiClient, namespace: str, which: str) -> float:
    body = {
        "metadata": {"name": f"b-{uuid.uuid4().hex[:10]}", "labels": {LABEL: which}},
        "data": {"k": "v"},
    }
    started = time.perf_counter()
    answer = await api.request(
        "POST",
        CONFIGMAPS.path(namespace),
        body={"apiVersion": "v1", "kind": "ConfigMap", **body},
        params={"dryRun": "All"},
    )
    elapsed = (time.perf_counter() - started) * 1000
    labels = answer["metadata"].get("labels") or {}
    if which != "none" and labels.get("checked") != "yes":
        raise AssertionError(f"the {which} webhook did not change the object: {labels}")
    return elapsed


async def at_concurrency(
    api: ApiClient, namespace: str, which: str, requests: int, concurrency: int
) -> list[float]:
    slots = asyncio.Semaphore(concurrency)

    async def one() -> float:
        async with slots:
            return await create(api, namespace, which)

    return list(await asyncio.gather(*(one() for _ in range(requests))))


async def wait_served(api: ApiClient, namespace: str, which: str) -> None:
    deadline = time.monotonic() + 120
    while True:
        with contextlib.suppress(AssertionError, ApiError):
            await create(api, namespace, which)
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"the {which} webhook was never called")
        await asyncio.sleep(0.5)


# (webhook, reconcile runs' nice increment or "-" with none running, reconciles, concurrent)
Row = tuple[str, str, int, int]


async def busy_reconciles(api: ApiClient, namespace: str, count: int) -> list[str]:
    """`count` Busy objects: each keeps a reconcile run going, one after the other."""
    names = [f"busy-{uuid.uuid4().hex[:6]}" for _ in range(count)]
    for name in names:
        body = {"apiVersion": f"{BUSY_GROUP}/v1", "kind": "Busy", "metadata": {"name": name}}
        await api.create(BUSY, body, namespace)
    return names


async def busy_running(operator: OperatorProcess, names: list[str]) -> None:
    """Until each Busy object's reconcile has run twice: the load is on."""
    deadline = time.monotonic() + 180
    while not all(
        len(re.findall(rf"run succeeded kind=Busy namespace=\S* name={name} ", operator.logs)) >= 2
        for name in names
    ):
        if time.monotonic() > deadline:
            raise SystemExit(f"the busy reconciles did not run: {operator.logs[-3000:]}")
        await asyncio.sleep(1)


async def measure(
    config: KubeConfig,
    operator: OperatorProcess,
    nice: int,
    requests: int,
    levels: list[int],
    reconciles: list[int],
    scratch: Path,
) -> list[tuple[Row, list[float]]]:
    namespace = "default"
    name = f"bench-stock-{uuid.uuid4().hex[:6]}"
    runner, port, ca = await stock_webhook(scratch)
    results: list[tuple[Row, list[float]]] = []
    async with ApiClient(config) as api:
        await api.create(MUTATING, stock_configuration(name, port, ca))
        try:
            for which in ("ansible", "stock"):
                await wait_served(api, namespace, which)
            for running in reconciles:
                busy = await busy_reconciles(api, namespace, running)
                await busy_running(operator, busy)
                try:
                    for concurrency in levels:
                        for which in ("none", "stock", "ansible"):
                            count = max(requests, 3 * concurrency)
                            if which != "ansible":
                                count *= 5  # cheap: more samples for a steadier p99
                            # the first ones warm up
                            await at_concurrency(api, namespace, which, concurrency, concurrency)
                            samples = await at_concurrency(
                                api, namespace, which, count, concurrency
                            )
                            niceness = str(nice) if running else "-"
                            results.append(((which, niceness, running, concurrency), samples))
                finally:
                    for busy_name in busy:
                        with contextlib.suppress(ApiError):
                            await api.delete(BUSY, busy_name, namespace)
        finally:
            with contextlib.suppress(ApiError):
                await api.delete(MUTATING, name)
            await runner.cleanup()
    return results


def report(results: list[tuple[Row, list[float]]]) -> None:
    print(
        "ConfigMap creates (server-side dry run) through the API server; milliseconds; "
        "ansible: a three-task mutating role served by ansible-operator (warm runner); "
        "stock: the same change by a trivial aiohttp webhook; none: no webhook; "
        "reconciles: runs of a role keeping a core busy, going on meanwhile, at that nice "
        "increment (--reconcile-run-nice)"
    )
    header = f"{'webhook':<8} {'reconciles':>10} {'nice':>5} {'concurrent':>10} {'requests':>9}"
    print(f"{header} {'p50':>9} {'p99':>9}")
    for (which, nice, running, concurrency), samples in sorted(
        results, key=lambda row: (row[0][2], row[0][3], row[0][0], row[0][1])
    ):
        p50, p99 = statistics.median(samples), percentile(samples, 0.99)
        print(
            f"{which:<8} {running:>10} {nice:>5} {concurrency:>10} {len(samples):>9} "
            f"{p50:9.1f} {p99:9.1f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=40, help="Ansible creates per level")
    parser.add_argument("--concurrency", default="1,10", help="comma list (default: 1,10)")
    parser.add_argument(
        "--reconciles", default="0,4", help="busy reconciles meanwhile, comma list (default: 0,4)"
    )
    parser.add_argument("--runner-mode", choices=("warm", "reference"), default="warm")
    parser.add_argument(
        "--max-concurrent-runs", type=int, default=None, help="--webhook-max-concurrent-runs"
    )
    args = parser.parse_args()
    levels = [int(level) for level in args.concurrency.split(",")]
    reconciles = [int(level) for level in args.reconciles.split(",")]
    # With reconciles running, both priorities; without, one operator is enough.
    nices = [10, 0] if any(reconciles) else [10]
    results: list[tuple[Row, list[float]]] = []
    with tempfile.TemporaryDirectory(prefix="bench-webhook-") as scratch_dir:
        scratch = Path(scratch_dir)
        project = scratch / "project"
        for role, tasks in (("bench", ROLE), ("busy", BUSY_ROLE)):
            (project / "roles" / role / "tasks").mkdir(parents=True)
            (project / "roles" / role / "tasks" / "main.yml").write_text(tasks)
        (project / "watches.yaml").write_text(WATCHES)
        with provide() as cluster:
            with ApiSync(str(cluster.kubeconfig)) as sync_api:
                apply_manifests(
                    sync_api, yaml.safe_dump(schemaless_crd(BUSY_GROUP, "Busy", "busies"))
                )
            for nice in nices:
                results += run_operator(
                    project, scratch, Path(cluster.kubeconfig), args, nice, levels,
                    reconciles if nice == nices[0] else [level for level in reconciles if level],
                )  # fmt: skip
    report(results)


def run_operator(
    project: Path,
    scratch: Path,
    kubeconfig: Path,
    args: argparse.Namespace,
    nice: int,
    levels: list[int],
    reconciles: list[int],
) -> list[tuple[Row, list[float]]]:
    extra = [f"--webhook-max-concurrent-runs={args.max_concurrent_runs}"]
    operator = OperatorProcess(
        project / "watches.yaml",
        kubeconfig,
        log_path=scratch / f"operator-{nice}.log",
        args=[
            "--webhook-bind-address=127.0.0.1:0",
            f"--webhook-configuration-name=bench-{uuid.uuid4().hex[:6]}",
            f"--runner-mode={args.runner_mode}",
            "--ansible-log-events=nothing",
            "--ansible-verbosity=0",
            f"--reconcile-run-nice={nice}",
            f"--max-concurrent-reconciles={max(reconciles, default=1) or 1}",
            *(extra if args.max_concurrent_runs else []),
        ],
    ).start()
    try:
        return asyncio.run(
            measure(
                load_config(kubeconfig), operator, nice, args.requests, levels, reconciles, scratch
            )
        )
    except BaseException:
        print(operator.logs[-3000:], file=sys.stderr)
        raise
    finally:
        operator.stop()


if __name__ == "__main__":
    main()
