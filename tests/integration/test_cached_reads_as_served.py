"""A run's reads answered from the operator's cache are what the API server
would answer, although the cache stores objects packed (kube/transform.py):
a real role applies a ConfigMap
twice with `k8s` `apply: true`, the second time without a field (client-side
apply finds it in the last-applied annotation of the cached read, and removes
it), and reads it with `k8s_info`, managedFields included."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.testing.operator import SERVE_METRICS, OperatorProcess
from ansible_operator.testing.waiting import eventually

pytestmark = pytest.mark.cluster

LABEL = "cache-transform-test"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
HITS = "ansible_operator_proxy_cache_hits_total"

WATCHES = f"""\
- version: v1
  group: ""
  kind: ConfigMap
  role: apply_twice
  manageStatus: false
  selector:
    matchLabels:
      {LABEL}: trigger
"""

# The trigger ConfigMap's data, applied to "<name>-applied"; what k8s_info then
# read of it goes to "<name>-report".
TASKS = """\
- name: apply the trigger's data
  kubernetes.core.k8s:
    apply: true
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: "{{ ansible_operator_meta.name }}-applied"
        namespace: "{{ ansible_operator_meta.namespace }}"
      data: "{{ __configmap.data }}"
- name: read it back
  kubernetes.core.k8s_info:
    kind: ConfigMap
    name: "{{ ansible_operator_meta.name }}-applied"
    namespace: "{{ ansible_operator_meta.namespace }}"
  register: read
- name: report what the read saw
  kubernetes.core.k8s:
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: "{{ ansible_operator_meta.name }}-report"
        namespace: "{{ ansible_operator_meta.namespace }}"
      data:
        keys: "{{ read.resources[0].data.keys() | sort | join(',') }}"
        managers: "{{ read.resources[0].metadata.managedFields | default([])
          | map(attribute='manager') | join(',') }}"
        lastApplied: "{{ (read.resources[0].metadata.annotations | default({}))
          ['kubectl.kubernetes.io/last-applied-configuration'] | default('') }}"
"""


@pytest.fixture
def operator(
    kube_cluster: Cluster, kube_namespace: str, tmp_path: Path
) -> Iterator[OperatorProcess]:
    tasks = tmp_path / "roles" / "apply_twice" / "tasks"
    tasks.mkdir(parents=True)
    (tasks / "main.yml").write_text(TASKS)
    (tmp_path / "watches.yaml").write_text(WATCHES)
    process = OperatorProcess(
        tmp_path / "watches.yaml",
        kube_cluster.kubeconfig,
        log_path=tmp_path / "operator.log",
        env={"WATCH_NAMESPACE": kube_namespace},
        args=[SERVE_METRICS],
    ).start()
    yield process
    process.stop()


def config_map(core: client.CoreV1Api, namespace: str, name: str) -> client.V1ConfigMap | None:
    try:
        return core.read_namespaced_config_map(name, namespace)
    except client.ApiException as error:
        if error.status == 404:
            return None
        raise


def test_apply_twice_and_k8s_info_through_the_cache_see_what_the_server_has(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    core = client.CoreV1Api(kube_api)
    core.create_namespaced_config_map(
        kube_namespace,
        client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name="t", labels={LABEL: "trigger"}),
            data={"keep": "1", "drop": "2"},
        ),
    )
    eventually(
        lambda: (
            (r := config_map(core, kube_namespace, "t-report")) is not None
            and r.data["keys"] == "drop,keep"
        ),
        describe=lambda: "the first run's report",
    )
    hits_before = operator.metric(HITS)

    # The second run applies the data without "drop": its k8s module reads the
    # object it applied before (from the cache, now that the kind is watched).
    core.patch_namespaced_config_map("t", kube_namespace, {"data": {"drop": None}})
    eventually(
        lambda: (
            (r := config_map(core, kube_namespace, "t-report")) is not None
            and r.data["keys"] == "keep"
        ),
        describe=lambda: "the second run's report",
    )

    applied = config_map(core, kube_namespace, "t-applied")
    assert applied is not None and applied.data == {"keep": "1"}  # removed by the apply
    report = config_map(core, kube_namespace, "t-report")
    assert report is not None
    # What k8s_info read is the object as the server has it.
    managers = [entry.manager for entry in applied.metadata.managed_fields]
    assert managers and report.data["managers"].split(",") == managers
    assert report.data["lastApplied"] == applied.metadata.annotations[LAST_APPLIED]
    assert '"keep":"1"' in report.data["lastApplied"].replace(" ", "")
    # ... and came from the operator's cache.
    assert operator.metric(HITS) > hits_before
