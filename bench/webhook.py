"""Latency an admission webhook written in Ansible adds to the API path, beside a stock one;
and what a conversion costs, by field map and by role, for reviews of 1, 10 and 100 objects.

    .venv/bin/python bench/webhook.py [--requests 40] [--concurrency 1,10] [--reconciles 0,4]
                                      [--conversion-sizes 1,10,100] [--conversion-requests 40]

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

Conversions (`--conversion-sizes`, a comma list of review sizes; `0` skips them): a kind with
the HarborCluster sample's two shapes (v1beta1 the hub, v1alpha3 by the sample's field map)
and a third version converted by a one-task role, served by the same operator. For each
review size N: the field map's conversion of N objects in this process (the converter's own
cost: what the operator spends on the event loop), ConversionReviews of N objects posted to
the operator's webhook port over HTTPS (by field map, new objects each time; the same review
again, answered from what the converter remembers; by role, one warm run per review), and a
list of N objects through the API server in the hub version (no conversion), in v1alpha3 and
in the role's version. Prints p50 and p99 in milliseconds.
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

import aiohttp
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


# ----- conversions ----------------------------------------------------------------------
CONVERTED_GROUP = "bench.ansible-operator.io"
CONVERTED_PLURAL = "gadgets"
CONVERTED = Resource(CONVERTED_GROUP, "v1beta1", "Gadget", CONVERTED_PLURAL, True)
CONVERSION_ROLE = """
- name: the objects in the version asked, nothing else changed (the run's own cost)
  operator_sdk.util.conversion_response:
    objects: >-
      {{ conversion.objects
         | map('combine', {'apiVersion': conversion.desired_api_version}) | list }}
"""
ROOT = Path(__file__).resolve().parents[1]
SAMPLE_CRD = ROOT / "config" / "crd" / "bases" / "goharbor.io_harborclusters.yaml"


def conversion_watches() -> str:
    """The sample's HarborCluster conversion, for this group's Gadget, and a role version."""
    text = (ROOT / "watches.yaml").read_text()
    start = text.index("- conversion:\n    group: goharbor.io\n    kind: HarborCluster")
    end = text.index("\n# ---", start) if "\n# ---" in text[start:] else len(text)
    entry = text[start:end].rstrip() + "\n"
    entry = entry.replace("group: goharbor.io", f"group: {CONVERTED_GROUP}").replace(
        "kind: HarborCluster", "kind: Gadget"
    )
    return entry + "      - version: v2\n        role: convert\n"


def conversion_crd() -> dict[str, Any]:
    crd = yaml.safe_load(SAMPLE_CRD.read_text())
    crd["metadata"]["name"] = f"{CONVERTED_PLURAL}.{CONVERTED_GROUP}"
    crd["spec"]["group"] = CONVERTED_GROUP
    crd["spec"]["names"] = {
        "kind": "Gadget",
        "listKind": "GadgetList",
        "plural": CONVERTED_PLURAL,
        "singular": "gadget",
    }
    hub = next(v for v in crd["spec"]["versions"] if v["name"] == "v1beta1")
    crd["spec"]["versions"].append({**hub, "name": "v2", "storage": False})
    del crd["spec"]["conversion"]  # the operator sets it
    return crd


def gadget(index: int, namespace: str = "default") -> dict[str, Any]:
    """A HarborCluster-shaped object as the API server stores it (status included)."""
    return {
        "apiVersion": f"{CONVERTED_GROUP}/v1beta1",
        "kind": "Gadget",
        "metadata": {
            "name": f"g-{index:04d}",
            "namespace": namespace,
            "uid": str(uuid.uuid4()),
            "resourceVersion": str(1000 + index),
            "generation": 1,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app.kubernetes.io/name": "harbor"},
        },
        "spec": {
            "version": "2.10.0",
            "externalURL": f"https://harbor-{index}.example.com",
            "database": {"replicas": 2, "storage": "5Gi", "version": "16"},
            "cache": {"replicas": 3, "sentinelReplicas": 3},
            "storage": {"servers": 4, "volumesPerServer": 2, "size": "10Gi"},
            "configuration": {"email_from": "admin <harbor@example.com>"},
        },
        "status": {
            "status": "healthy",
            "conditions": [
                {
                    "type": kind,
                    "status": "True",
                    "reason": "Ready",
                    "message": f"{kind} is ready",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
                for kind in ("DatabaseReady", "CacheReady", "StorageReady", "ServiceReady")
            ],
        },
    }


def review(objects: list[dict[str, Any]], version: str) -> bytes:
    return json.dumps(
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "request": {
                "uid": str(uuid.uuid4()),
                "desiredAPIVersion": f"{CONVERTED_GROUP}/{version}",
                "objects": objects,
            },
        }
    ).encode()


def in_process(sizes: list[int], requests: int) -> dict[int, tuple[list[float], list[float]]]:
    """The field map's conversion of a review of N new objects, in this process: wall and
    CPU milliseconds (on a busy machine the CPU time is the converter's own cost)."""
    from ansible_operator.conversion.converter import Converter
    from ansible_operator.conversion.schema import version_schemas
    from ansible_operator.project.watches import load_watches_file

    with tempfile.TemporaryDirectory() as scratch:
        watches = Path(scratch) / "watches.yaml"
        watches.write_text(conversion_watches().split("      - version: v2")[0])
        [declared] = load_watches_file(watches, env={}).conversions
    converter = Converter(declared, version_schemas(conversion_crd()))
    found: dict[int, tuple[list[float], list[float]]] = {}

    async def measure(objects: list[dict[str, Any]]) -> tuple[float, float]:
        wall, cpu = time.perf_counter(), time.thread_time()
        await converter.convert(objects, "v1alpha3")
        return (time.perf_counter() - wall) * 1000, (time.thread_time() - cpu) * 1000

    async def each_size(size: int) -> tuple[list[float], list[float]]:
        walls, cpus = [], []
        for _ in range(max(requests, 200)):
            wall, cpu = await measure([gadget(index) for index in range(size)])
            walls.append(wall)
            cpus.append(cpu)
        return walls, cpus

    for size in sizes:
        found[size] = asyncio.run(each_size(size))
    return found


async def measure_conversions(
    config: KubeConfig, operator: OperatorProcess, sizes: list[int], requests: int
) -> dict[tuple[int, str], list[float]]:
    found: dict[tuple[int, str], list[float]] = {}
    port = operator.port("webhook")
    async with ApiClient(config) as api:
        crd_resource = Resource(
            "apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions",
            False,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while True:
            crd = await api.get(crd_resource, f"{CONVERTED_PLURAL}.{CONVERTED_GROUP}")
            bundle = (
                ((crd["spec"].get("conversion") or {}).get("webhook") or {})
                .get("clientConfig", {})
                .get("caBundle")
            )
            if bundle:
                break
            if time.monotonic() > deadline:
                raise SystemExit("the operator never set the CRD's conversion caBundle")
            await asyncio.sleep(0.5)
        context = ssl.create_default_context(cadata=base64.b64decode(bundle).decode())
        url = f"https://127.0.0.1:{port}/convert/gadget.{CONVERTED_GROUP}"

        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as http:

            async def post(body: bytes) -> float:
                started = time.perf_counter()
                async with http.post(url, data=body) as answer:
                    result = (await answer.json())["response"]["result"]
                elapsed = (time.perf_counter() - started) * 1000
                if result["status"] != "Success":
                    raise SystemExit(f"conversion failed: {result}")
                return elapsed

            for size in sizes:
                for how, version in (("fieldMap", "v1alpha3"), ("role", "v2")):
                    await post(review([gadget(i) for i in range(size)], version))  # warm up
                    count = requests if how == "role" else requests * 5
                    found[(size, f"HTTPS {how}")] = [
                        await post(review([gadget(i) for i in range(size)], version))
                        for _ in range(count)
                    ]
                same = review([gadget(i) for i in range(size)], "v1alpha3")
                await post(same)
                found[(size, "HTTPS fieldMap remembered")] = [
                    await post(same) for _ in range(requests * 5)
                ]
        namespace = f"bench-conversion-{uuid.uuid4().hex[:6]}"
        namespaces = Resource("", "v1", "Namespace", "namespaces", False)
        await api.create(namespaces, {"metadata": {"name": namespace}})
        try:
            for index in range(max(sizes)):
                body = gadget(index, namespace)
                for key in ("uid", "resourceVersion", "generation", "creationTimestamp"):
                    del body["metadata"][key]
                del body["status"]
                await api.create(CONVERTED, body, namespace)
            # The garbage collector watches the group's preferred version (v2, the
            # role's): every object created is converted for it. Wait those out: on a
            # busy machine a list can time out (504) behind them, so it is asked again.
            for version in ("v1beta1", "v1alpha3", "v2"):
                listed = Resource(CONVERTED_GROUP, version, "Gadget", CONVERTED_PLURAL, True)
                started, deadline = time.monotonic(), time.monotonic() + 900
                while True:
                    try:
                        await api.request("GET", listed.path(namespace))
                        break
                    except ApiError as error:
                        if error.status != 504 or time.monotonic() > deadline:
                            raise
                print(
                    f"first list in {version}: {time.monotonic() - started:.1f} s",
                    file=sys.stderr,
                )
            for size in sizes:
                for label, version in (
                    ("list hub (none)", "v1beta1"),
                    ("list fieldMap", "v1alpha3"),
                    ("list role", "v2"),
                ):
                    listed = Resource(CONVERTED_GROUP, version, "Gadget", CONVERTED_PLURAL, True)
                    samples = []
                    for _ in range(requests):
                        started = time.perf_counter()
                        page = await api.request(
                            "GET", listed.path(namespace), params={"limit": str(size)}
                        )
                        samples.append((time.perf_counter() - started) * 1000)
                        if len(page["items"]) != size:
                            raise SystemExit(f"listed {len(page['items'])}, not {size}")
                    found[(size, label)] = samples
        finally:
            with contextlib.suppress(ApiError):
                await api.delete(namespaces, namespace)
    return found


def report_conversions(
    local: dict[int, tuple[list[float], list[float]]], served: dict[tuple[int, str], list[float]]
) -> None:
    print(
        "\nConversions of HarborCluster-shaped objects (v1beta1 -> v1alpha3 by the sample's "
        "field map, each object keeping two fields in the annotation; -> v2 by a one-task "
        "role, warm runner); milliseconds, p50 / p99. in process: the converter alone, wall "
        "and CPU; HTTPS: a ConversionReview posted to the operator's webhook port; "
        "remembered: the same objects again; list: through the API server (hub: no "
        "conversion)"
    )
    columns = [
        "in process fieldMap",
        "in process fieldMap CPU",
        "HTTPS fieldMap",
        "HTTPS fieldMap remembered",
        "HTTPS role",
        "list hub (none)",
        "list fieldMap",
        "list role",
    ]
    print(f"{'objects':>7} " + " ".join(f"{column:>26}" for column in columns))
    for size in sorted(local):
        cells = []
        for column in columns:
            if column == "in process fieldMap":
                samples = local[size][0]
            elif column == "in process fieldMap CPU":
                samples = local[size][1]
            else:
                samples = served.get((size, column), [])
            if not samples:
                cells.append(f"{'-':>26}")
                continue
            p50, p99 = statistics.median(samples), percentile(samples, 0.99)
            cells.append(f"{p50:>12.2f} / {p99:>9.2f}  ")
        print(f"{size:>7} " + " ".join(cells))


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
    parser.add_argument(
        "--conversion-sizes", default="1,10,100", help="review sizes, comma list (0: none)"
    )
    parser.add_argument("--conversion-requests", type=int, default=40, help="role reviews per size")
    parser.add_argument("--only-conversions", action="store_true", help="measure conversions alone")
    args = parser.parse_args()
    sizes = [int(size) for size in args.conversion_sizes.split(",") if int(size)]
    levels = [int(level) for level in args.concurrency.split(",")]
    reconciles = [int(level) for level in args.reconciles.split(",")]
    # With reconciles running, both priorities; without, one operator is enough.
    nices = [10, 0] if any(reconciles) else [10]
    results: list[tuple[Row, list[float]]] = []
    served: dict[tuple[int, str], list[float]] = {}
    local = in_process(sizes, args.conversion_requests) if sizes else {}
    with tempfile.TemporaryDirectory(prefix="bench-webhook-") as scratch_dir:
        scratch = Path(scratch_dir)
        project = scratch / "project"
        roles = (("bench", ROLE), ("busy", BUSY_ROLE), ("convert", CONVERSION_ROLE))
        for role, tasks in roles:
            (project / "roles" / role / "tasks").mkdir(parents=True)
            (project / "roles" / role / "tasks" / "main.yml").write_text(tasks)
        (project / "watches.yaml").write_text(WATCHES + (conversion_watches() if sizes else ""))
        with provide() as cluster:
            with ApiSync(str(cluster.kubeconfig)) as sync_api:
                apply_manifests(
                    sync_api, yaml.safe_dump(schemaless_crd(BUSY_GROUP, "Busy", "busies"))
                )
                if sizes:
                    apply_manifests(sync_api, yaml.safe_dump(conversion_crd()))
            for nice in nices if not args.only_conversions else nices[:1]:
                first = nice == nices[0]
                results += run_operator(
                    project, scratch, Path(cluster.kubeconfig), args, nice, levels,
                    reconciles if first else [level for level in reconciles if level],
                    sizes if first else [], served,
                )  # fmt: skip
    if not args.only_conversions:
        report(results)
    if sizes:
        report_conversions(local, served)


def run_operator(
    project: Path,
    scratch: Path,
    kubeconfig: Path,
    args: argparse.Namespace,
    nice: int,
    levels: list[int],
    reconciles: list[int],
    sizes: list[int],
    served: dict[tuple[int, str], list[float]],
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
        if sizes:
            served.update(
                asyncio.run(
                    measure_conversions(
                        load_config(kubeconfig), operator, sizes, args.conversion_requests
                    )
                )
            )
        if args.only_conversions:
            return []
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
