"""Latency an admission webhook written in Ansible adds to the API path, beside a stock one.

    .venv/bin/python bench/webhook.py [--requests 40] [--concurrency 1,10]

Starts a local control plane (or uses KUBECONFIG) and `ansible-operator run` serving one
mutating webhook whose role has three tasks (compute a label, check the object, answer with
the changed object), and, in this process, a trivial aiohttp webhook doing the same change in
Python. ConfigMaps are created (server-side dry run: nothing is stored) through the API
server, as kubectl creates them, each labelled for one webhook or for none, at each
concurrency. Prints p50 and p99 of the whole create, in milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import ssl
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from aiohttp import web

from ansible_operator import pki
from ansible_operator.cluster import provide
from ansible_operator.kube.client import ApiClient, ApiError
from ansible_operator.kube.config import KubeConfig, load_config
from ansible_operator.kube.types import Resource
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
WATCHES = f"""
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


async def measure(
    config: KubeConfig, operator: OperatorProcess, requests: int, levels: list[int], scratch: Path
) -> None:
    namespace = "default"
    name = f"bench-stock-{uuid.uuid4().hex[:6]}"
    runner, port, ca = await stock_webhook(scratch)
    results: list[tuple[str, int, list[float]]] = []
    async with ApiClient(config) as api:
        await api.create(MUTATING, stock_configuration(name, port, ca))
        try:
            for which in ("ansible", "stock"):
                await wait_served(api, namespace, which)
            for concurrency in levels:
                for which in ("none", "stock", "ansible"):
                    count = max(requests, 3 * concurrency)
                    if which != "ansible":
                        count *= 5  # cheap: more samples for a steadier p99
                    await at_concurrency(api, namespace, which, concurrency, concurrency)  # warm
                    samples = await at_concurrency(api, namespace, which, count, concurrency)
                    results.append((which, concurrency, samples))
        finally:
            with contextlib.suppress(ApiError):
                await api.delete(MUTATING, name)
            await runner.cleanup()
    print(
        "ConfigMap creates (server-side dry run) through the API server; milliseconds; "
        "ansible: a three-task mutating role served by ansible-operator (warm runner); "
        "stock: the same change by a trivial aiohttp webhook; none: no webhook"
    )
    print(f"{'webhook':<8} {'concurrent':>10} {'requests':>9} {'p50':>9} {'p99':>9}")
    for which, concurrency, samples in results:
        p50, p99 = statistics.median(samples), percentile(samples, 0.99)
        print(f"{which:<8} {concurrency:>10} {len(samples):>9} {p50:9.1f} {p99:9.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=40, help="Ansible creates per level")
    parser.add_argument("--concurrency", default="1,10", help="comma list (default: 1,10)")
    parser.add_argument("--runner-mode", choices=("warm", "reference"), default="warm")
    parser.add_argument(
        "--max-concurrent-runs", type=int, default=None, help="--webhook-max-concurrent-runs"
    )
    args = parser.parse_args()
    levels = [int(level) for level in args.concurrency.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench-webhook-") as scratch_dir:
        scratch = Path(scratch_dir)
        project = scratch / "project"
        (project / "roles" / "bench" / "tasks").mkdir(parents=True)
        (project / "roles" / "bench" / "tasks" / "main.yml").write_text(ROLE)
        (project / "watches.yaml").write_text(WATCHES)
        with provide() as cluster:
            extra = [f"--webhook-max-concurrent-runs={args.max_concurrent_runs}"]
            operator = OperatorProcess(
                project / "watches.yaml",
                Path(cluster.kubeconfig),
                log_path=scratch / "operator.log",
                args=[
                    "--webhook-bind-address=127.0.0.1:0",
                    f"--webhook-configuration-name=bench-{uuid.uuid4().hex[:6]}",
                    f"--runner-mode={args.runner_mode}",
                    "--ansible-log-events=nothing",
                    "--ansible-verbosity=0",
                    *(extra if args.max_concurrent_runs else []),
                ],
            ).start()
            try:
                asyncio.run(
                    measure(
                        load_config(Path(cluster.kubeconfig)),
                        operator,
                        args.requests,
                        levels,
                        scratch,
                    )
                )
            except BaseException:
                print(operator.logs[-3000:], file=sys.stderr)
                raise
            finally:
                operator.stop()


if __name__ == "__main__":
    main()
