"""Traces as a user reads them in their tracing backend: a real operator with
OTEL_EXPORTER_OTLP_ENDPOINT set sends its spans to a real OpenTelemetry Collector
(tools/otel-collector: otelcol and its OTLP receiver, built from Go modules), and
what the collector received is one trace per reconcile: the reconcile, its
Ansible run, each task with its file:line and outcome, each API request the
task sent through the proxy; a `traceparent` annotation continues the caller's
trace; and no span carries what a run must not let out."""

from __future__ import annotations

import base64
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from greetings import GROUP, KINDS, OPERATOR, VERSION, create, greeting
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.observability.trace_context import TRACEPARENT_ANNOTATION
from ansible_operator.testing.operator import OperatorProcess
from ansible_operator.testing.waiting import wait_for_condition
from go_tools import built
from otel_collector import Collector, ReceivedSpan

pytestmark = pytest.mark.cluster

GREETING_TASKS = OPERATOR / "roles" / "greeting" / "tasks" / "main.yml"
SERVER = 2  # OTLP span kind


@pytest.fixture(scope="module")
def collector_binary() -> Path:
    return built("otel-collector")


@pytest.fixture
def collector(collector_binary: Path, tmp_path: Path) -> Iterator[Collector]:
    with Collector(collector_binary, tmp_path / "collector").start() as running:
        yield running


def traced_operator(
    watches: Path, cluster: Cluster, namespace: str, collector: Collector, log: Path
) -> OperatorProcess:
    return OperatorProcess(
        watches,
        cluster.kubeconfig,
        log_path=log,
        env={
            "WATCH_NAMESPACE": namespace,
            "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
            "OTEL_SERVICE_NAME": "greetings-operator",
            # Batches every 0.2 s rather than 5 s: the test waits less, nothing else changes.
            "OTEL_BSP_SCHEDULE_DELAY": "200",
        },
    ).start()


@pytest.fixture
def operator(
    kube_cluster: Cluster,
    test_crds: None,
    kube_namespace: str,
    collector: Collector,
    tmp_path: Path,
) -> Iterator[OperatorProcess]:
    process = traced_operator(
        OPERATOR / "watches.yaml", kube_cluster, kube_namespace, collector, tmp_path / "op.log"
    )
    yield process
    process.stop()


def line_of(path: Path, task: str) -> int:
    """The line of `- name: TASK` in a tasks file (what Ansible's task_path names)."""
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if line.strip() == f"- name: {task}":
            return number
    raise AssertionError(f"no task {task!r} in {path}")


def reconcile_of(name: str, result: str) -> Any:
    def check(spans: list[ReceivedSpan]) -> ReceivedSpan | None:
        return next(
            (
                span
                for span in spans
                if span.name == "reconcile Greeting"
                and span.attributes.get("k8s.object.name") == name
                and span.attributes.get("reconcile.result") == result
            ),
            None,
        )

    return check


def children(spans: list[ReceivedSpan], parent: ReceivedSpan) -> list[ReceivedSpan]:
    return [
        span
        for span in spans
        if span.trace_id == parent.trace_id and span.parent_span_id == parent.span_id
    ]


def random_traceparent() -> tuple[str, str, str]:
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace_id}-{span_id}-01", trace_id, span_id


def test_a_reconcile_is_one_trace_of_its_run_its_tasks_and_their_api_requests(
    operator: OperatorProcess,
    kube_api: client.ApiClient,
    kube_namespace: str,
    collector: Collector,
) -> None:
    uid = create(kube_api, kube_namespace, greeting("traced", greetingMessage="hi"))["metadata"][
        "uid"
    ]
    wait_for_condition(
        kube_api, GROUP, VERSION, "greetings", kube_namespace, "traced", "Successful"
    )
    reconcile = collector.wait_for(reconcile_of("traced", "succeeded"), what="the reconcile's span")
    spans = collector.spans()

    # The reconcile starts the trace, and says which object and generation it was.
    assert reconcile.parent_span_id == ""
    assert reconcile.attributes["k8s.namespace.name"] == kube_namespace
    assert reconcile.attributes["k8s.object.uid"] == uid
    assert reconcile.attributes["k8s.object.kind"] == "Greeting"
    assert reconcile.attributes["k8s.object.generation"] == 1
    assert reconcile.resource["service.name"] == "greetings-operator"
    assert not reconcile.failed

    # One trace: every span in it hangs from the reconcile.
    in_trace = [span for span in spans if span.trace_id == reconcile.trace_id]
    ids = {span.span_id for span in in_trace}
    assert [span for span in in_trace if span.parent_span_id not in ids] == [reconcile]

    # Its steps, in order: where its time went besides the run.
    steps = [span.name for span in sorted(children(spans, reconcile), key=lambda s: s.start_ns)]
    assert steps[0] == "admit" and steps[-1] == "write status", steps
    assert steps.index("add finalizer") < steps.index("ansible run"), steps
    assert steps.count("write status") == 2, steps  # Running, then Successful

    # Its Ansible run, the child of the reconcile, within it.
    [run] = [span for span in children(spans, reconcile) if span.name == "ansible run"]
    assert run.attributes["ansible.role"] == "greeting"
    assert run.attributes["ansible.run.status"] == "successful"
    assert reconcile.start_ns <= run.start_ns <= run.end_ns <= reconcile.end_ns

    # One span per task, named after the role's task, with its file:line and outcome.
    tasks = {
        span.name: span for span in children(spans, run) if "ansible.task.name" in span.attributes
    }
    written = tasks["Write the greeting ConfigMap"]
    line = line_of(GREETING_TASKS, "Write the greeting ConfigMap")
    assert written.attributes["ansible.task.path"].endswith(f"roles/greeting/tasks/main.yml:{line}")
    assert written.attributes["code.file.path"] == str(GREETING_TASKS.resolve())
    assert written.attributes["code.line.number"] == line
    assert written.attributes["ansible.task.role"] == "greeting"
    assert written.attributes["ansible.task.module"] == "kubernetes.core.k8s"
    assert written.attributes["ansible.task.changed"] is True
    assert written.attributes["ansible.task.failed"] is False
    assert written.attributes["ansible.task.host.name"] == "localhost"
    skipped = tasks["Fail when asked to"]
    assert skipped.attributes["ansible.task.skipped"] is True
    assert skipped.attributes["ansible.task.host.status"] == "skipped"
    assert not skipped.failed
    for task in tasks.values():  # timed by Ansible's own events, within the run
        assert run.start_ns <= task.start_ns <= task.end_ns <= run.end_ns

    # Each API request through the proxy, under the task that sent it.
    created = [
        span
        for span in children(spans, written)
        if span.attributes.get("k8s.request.verb") == "create"
    ]
    assert [span.name for span in created] == ["proxy create configmaps"]
    [request] = created
    assert request.kind == SERVER
    assert request.attributes["http.request.method"] == "POST"
    assert request.attributes["http.response.status_code"] == 201
    assert request.attributes["k8s.request.resource"] == "configmaps"
    assert request.attributes["k8s.namespace.name"] == kube_namespace
    assert written.start_ns <= request.start_ns <= written.end_ns
    status_writes = children(spans, tasks["Write a status key of the role's own"])
    assert any(
        span.attributes.get("k8s.request.resource") == f"{GROUP}/greetings"
        and span.attributes.get("k8s.request.subresource") == "status"
        and span.attributes.get("http.response.status_code") == 200
        for span in status_writes
    ), [span.attributes for span in status_writes]


def test_a_traceparent_annotation_continues_the_callers_trace_and_a_bad_one_is_ignored(
    operator: OperatorProcess,
    kube_api: client.ApiClient,
    kube_namespace: str,
    collector: Collector,
) -> None:
    traceparent, trace_id, span_id = random_traceparent()
    annotated = KINDS.body("Greeting", "synced", annotations={TRACEPARENT_ANNOTATION: traceparent})
    create(kube_api, kube_namespace, annotated)
    # Not a traceparent: a template, which nothing may evaluate, and junk.
    for name, value in (
        ("templated", "00-{{ lookup('pipe', 'id') }}-0000000000000001-01"),
        ("junk", "x" * 10_000),
    ):
        create(
            kube_api,
            kube_namespace,
            KINDS.body("Greeting", name, annotations={TRACEPARENT_ANNOTATION: value}),
        )
    for name in ("synced", "templated", "junk"):
        wait_for_condition(
            kube_api, GROUP, VERSION, "greetings", kube_namespace, name, "Successful"
        )

    synced = collector.wait_for(reconcile_of("synced", "succeeded"), what="the synced reconcile")
    # The caller's trace, under the caller's span: a GitOps tool's sync shows the reconcile.
    assert (synced.trace_id, synced.parent_span_id) == (trace_id, span_id)
    spans = collector.spans()
    [run] = [span for span in children(spans, synced) if span.name == "ansible run"]
    assert children(spans, run), "the run's tasks are in the caller's trace too"

    for name in ("templated", "junk"):
        ignored = collector.wait_for(reconcile_of(name, "succeeded"), what=f"{name}'s reconcile")
        assert ignored.parent_span_id == "" and ignored.trace_id != trace_id


SECRETIVE_TASKS = """\
- name: Read the token
  kubernetes.core.k8s_info:
    api_version: v1
    kind: Secret
    name: traced-token
    namespace: "{{ ansible_operator_meta.namespace }}"
  register: found

- name: Keep the token quietly
  no_log: true
  ansible.builtin.set_fact:
    token: "{{ found.resources[0].data.token | b64decode }}"

- name: Use the spec's password quietly
  no_log: true
  ansible.builtin.set_fact:
    password_used: "{{ password }}"

- name: "Greet {{ token }} as {{ password }}"
  ansible.builtin.debug:
    msg: hello

- name: Look for a ConfigMap named after the token
  kubernetes.core.k8s_info:
    api_version: v1
    kind: ConfigMap
    name: "{{ token }}"
    namespace: "{{ ansible_operator_meta.namespace }}"

- name: Fail quietly with the token
  no_log: true
  ignore_errors: true
  ansible.builtin.fail:
    msg: "{{ token }} {{ password }}"

- name: Fail saying the token and the password
  ansible.builtin.fail:
    msg: "cannot use {{ token }} nor {{ password }}"
"""


def test_no_span_carries_a_secret_or_a_no_log_value(
    kube_cluster: Cluster,
    test_crds: None,
    kube_api: client.ApiClient,
    kube_namespace: str,
    collector: Collector,
    tmp_path: Path,
) -> None:
    """The attack: a role reads a Secret and uses its value and a no_log value in a
    task's name, an API request's path, a no_log task's failure and a failure's
    message. The collector receives the spans of all of it, and not one byte of
    either value, in any form."""
    token = secrets.token_hex(12)  # lower-case hex: also a valid object name
    password = f"pw{secrets.token_hex(10)}"
    project = tmp_path / "project"
    (project / "roles" / "secretive" / "tasks").mkdir(parents=True)
    (project / "roles" / "secretive" / "tasks" / "main.yml").write_text(SECRETIVE_TASKS)
    (project / "watches.yaml").write_text(
        f"- version: {VERSION}\n  group: {GROUP}\n  kind: Greeting\n  role: secretive\n"
    )
    client.CoreV1Api(kube_api).create_namespaced_secret(
        kube_namespace,
        client.V1Secret(
            metadata=client.V1ObjectMeta(name="traced-token"), string_data={"token": token}
        ),
    )
    process = traced_operator(
        project / "watches.yaml", kube_cluster, kube_namespace, collector, tmp_path / "op.log"
    )
    try:
        create(kube_api, kube_namespace, greeting("secretive", password=password))
        wait_for_condition(
            kube_api, GROUP, VERSION, "greetings", kube_namespace, "secretive", "Failure"
        )
        reconcile = collector.wait_for(
            reconcile_of("secretive", "failed"), what="the failed reconcile's span"
        )
    finally:
        process.stop()

    spans = collector.spans()
    [run] = [span for span in children(spans, reconcile) if span.name == "ansible run"]
    tasks = {
        span.attributes["ansible.task.path"].rsplit(":", 1)[1]: span
        for span in children(spans, run)
        if "ansible.task.path" in span.attributes
    }
    # Every task is there, the failures failed, and the values are redacted where they were.
    assert len(tasks) == 7, sorted(span.name for span in tasks.values())
    greeted = next(span for span in tasks.values() if span.name.startswith("Greet "))
    assert greeted.name == "Greet <redacted> as <redacted>"
    looked_up = next(
        span
        for span in spans
        if span.parent_span_id
        in {task.span_id for task in tasks.values() if task.name.startswith("Look for")}
    )
    assert looked_up.attributes["k8s.object.name"] == "<redacted>"
    assert looked_up.attributes["http.response.status_code"] == 404
    failed = [span for span in tasks.values() if span.failed]
    assert [span.name for span in failed] == ["Fail saying the token and the password"]
    assert failed[0].status_message == "cannot use <redacted> nor <redacted>"
    quiet = next(span for span in tasks.values() if span.name == "Fail quietly with the token")
    assert quiet.attributes["ansible.task.host.status"] == "ignored"
    assert reconcile.failed and "<redacted>" in reconcile.status_message

    received = collector.received()
    for value in (token, password):
        for form in (value, base64.b64encode(value.encode()).decode()):
            assert form.encode() not in received, f"the collector received {form!r}"
