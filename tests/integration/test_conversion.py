"""Conversion webhooks declared in watches.yaml, served by `ansible-operator run` to a real
API server: a field map in the operator's process, a role through the warm runner, and
roles whose output the operator refuses before the API server sees it.

One operator for the module, one kind (Gadget) with a version per behaviour:

    v1        the hub and storage version; the operator's watch reads it
    v1alpha1  a field map: spec.size <- spec.replicas, spec.image split into repository
              and tag; it has no spec.tls, which travels in the annotation
    v2        a role: spec.size as a string, spec.labels as a list of "key=value"
    v3, v4, v5  roles that answer wrongly: another apiVersion, an object dropped, a name
              changed

Requests are made as kubectl makes them; what is asserted is what a user sees.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.testing.manifests import apply_manifests
from ansible_operator.testing.operator import SERVE_METRICS, OperatorProcess
from ansible_operator.testing.waiting import eventually, wait_for_condition

pytestmark = pytest.mark.cluster

GROUP, PLURAL, KIND = "conversion.test.io", "gadgets", "Gadget"
CRD_NAME = f"{PLURAL}.{GROUP}"
KEPT = "conversion.ansible-operator.io/v1"


def schema(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "openAPIV3Schema": {
            "type": "object",
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"type": "object"},
                "spec": {"type": "object", "properties": spec},
                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
        }
    }


HUB_SPEC = {
    "size": {"type": "integer"},
    "image": {"type": "string"},
    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
    "tls": {"type": "object", "properties": {"secret": {"type": "string"}}},
}
VERSIONS = {
    "v1": HUB_SPEC,
    "v1alpha1": {
        "replicas": {"type": "integer"},
        "repository": {"type": "string"},
        "tag": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    "v2": {
        "size": {"type": "string"},
        "image": {"type": "string"},
        "labels": {"type": "array", "items": {"type": "string"}},
        "tls": {"type": "object", "properties": {"secret": {"type": "string"}}},
    },
    "v3": HUB_SPEC,
    "v4": HUB_SPEC,
    "v5": HUB_SPEC,
}


def crd() -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": PLURAL, "singular": "gadget", "kind": KIND},
            "versions": [
                {
                    "name": name,
                    "served": True,
                    "storage": name == "v1",
                    "subresources": {"status": {}},
                    "schema": schema(spec),
                }
                for name, spec in VERSIONS.items()
            ],
        },
    }


ROLES = {
    "gadget": """
- operator_sdk.util.k8s_status:
    api_version: conversion.test.io/v1
    kind: Gadget
    name: "{{ ansible_operator_meta.name }}"
    namespace: "{{ ansible_operator_meta.namespace }}"
    status:
      seenSize: "{{ size }}"
""",
    # v2 <-> v1: size as a string, labels as "key=value" strings.
    "gadget_v2": """
- name: convert each object
  set_fact:
    converted: >-
      {{ converted | default([]) + [item | combine({
           'apiVersion': conversion.desired_api_version,
           'spec': item.spec | combine(
             {'size': item.spec.size | int} if conversion.to == conversion.hub else
             {'size': item.spec.size | string}) | combine(
             {} if 'labels' not in item.spec else
             {'labels': dict(item.spec.labels | map('split', '=', 1))}
             if conversion.to == conversion.hub else
             {'labels': item.spec.labels | dict2items
                        | map(attribute='key') | zip(item.spec.labels | dict2items
                        | map(attribute='value')) | map('join', '=') | list})})] }}
  loop: "{{ conversion.objects }}"
- operator_sdk.util.conversion_response:
    objects: "{{ converted | default([]) }}"
""",
    "wrong_version": """
- operator_sdk.util.conversion_response:
    objects: "{{ conversion.objects | map('combine', {'apiVersion': 'conversion.test.io/v9'}) }}"
""",
    "drops_one": """
- operator_sdk.util.conversion_response:
    objects: >-
      {{ conversion.objects[1:] | map('combine', {'apiVersion': conversion.desired_api_version})
         | list }}
""",
    "renames": """
- operator_sdk.util.conversion_response:
    objects: >-
      {{ conversion.objects | map('combine', {'apiVersion': conversion.desired_api_version,
                                              'metadata': {'name': 'someone-else'}},
                                  recursive=True) | list }}
""",
}

WATCHES = f"""
- version: v1
  group: {GROUP}
  kind: {KIND}
  role: gadget
- conversion:
    group: {GROUP}
    kind: {KIND}
    hub: v1
    versions:
      - version: v1alpha1
        fieldMap:
          - {{hub: spec.size, spoke: spec.replicas}}
          - hub: spec.image
            spoke: {{repository: spec.repository, tag: spec.tag}}
            format: "{{repository}}:{{tag}}"
      - version: v2
        role: gadget_v2
      - version: v3
        role: wrong_version
      - version: v4
        role: drops_one
      - version: v5
        role: renames
"""


@pytest.fixture(scope="module")
def operator(
    kube_cluster: Cluster, kube_api: client.ApiClient, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    project = tmp_path_factory.mktemp("conversion-operator")
    for role, tasks in ROLES.items():
        (project / "roles" / role / "tasks").mkdir(parents=True)
        (project / "roles" / role / "tasks" / "main.yml").write_text(tasks)
    (project / "watches.yaml").write_text(WATCHES)
    apply_manifests(kube_api, json.dumps(crd()))
    process = OperatorProcess(
        project / "watches.yaml",
        kube_cluster.kubeconfig,
        log_path=project / "operator.log",
        args=[
            "--webhook-bind-address=127.0.0.1:0",
            f"--webhook-configuration-name=conversion-{uuid.uuid4().hex[:6]}",
            SERVE_METRICS,
        ],
    ).start()
    try:
        yield process
    finally:
        process.stop()
        extensions = client.ApiextensionsV1Api(kube_api)
        # Served on loopback: the CRD gets back the stanza it had (none here: ours
        # stays, and reads of its other versions fail rather than lose fields).
        extensions.delete_custom_resource_definition(CRD_NAME)


def custom(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


def create(api: client.ApiClient, namespace: str, version: str, name: str, spec: dict) -> dict:
    body = {
        "apiVersion": f"{GROUP}/{version}",
        "kind": KIND,
        "metadata": {"name": name},
        "spec": spec,
    }
    return custom(api).create_namespaced_custom_object(GROUP, version, namespace, PLURAL, body)


def read(api: client.ApiClient, namespace: str, version: str, name: str) -> dict:
    return custom(api).get_namespaced_custom_object(GROUP, version, namespace, PLURAL, name)


def refused(api: client.ApiClient, namespace: str, version: str, name: str | None = None) -> str:
    """What a user reading in `version` is told (a get, or a list without `name`)."""
    with pytest.raises(client.ApiException) as error:
        if name is None:
            custom(api).list_namespaced_custom_object(GROUP, version, namespace, PLURAL)
        else:
            read(api, namespace, version, name)
    return error.value.body or ""


def test_an_object_written_in_one_version_is_read_in_every_other(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    create(
        kube_api,
        kube_namespace,
        "v1alpha1",
        "old",
        {"replicas": 3, "repository": "registry:5000/app", "tag": "1.2", "labels": {"a": "b"}},
    )
    hub = read(kube_api, kube_namespace, "v1", "old")
    assert hub["spec"] == {"size": 3, "image": "registry:5000/app:1.2", "labels": {"a": "b"}}
    by_role = read(kube_api, kube_namespace, "v2", "old")
    assert by_role["apiVersion"] == f"{GROUP}/v2"
    assert by_role["spec"] == {"size": "3", "image": "registry:5000/app:1.2", "labels": ["a=b"]}
    # The operator's watch (v1) reconciled it: its status reads back in the old version.
    wait_for_condition(kube_api, GROUP, "v1", PLURAL, kube_namespace, "old", "Successful")
    assert read(kube_api, kube_namespace, "v1alpha1", "old")["status"]["seenSize"] == 3
    # Written through the role's version, read through the field map's.
    create(kube_api, kube_namespace, "v2", "new", {"size": "5", "image": "nginx:1.27"})
    old_shape = read(kube_api, kube_namespace, "v1alpha1", "new")
    assert old_shape["spec"] == {"replicas": 5, "repository": "nginx", "tag": "1.27"}
    assert (
        operator.metric(
            "ansible_operator_conversion_objects_total", kind=f"{KIND}.{GROUP}", how="role"
        )
        >= 1
    )
    assert (
        operator.metric(
            "ansible_operator_conversion_reviews_total", kind=f"{KIND}.{GROUP}", result="succeeded"
        )
        >= 4
    )


def test_what_a_version_cannot_hold_comes_back_after_a_write_through_it(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    create(
        kube_api,
        kube_namespace,
        "v1",
        "tls",
        {"size": 1, "image": "app:1", "tls": {"secret": "app-tls"}},
    )
    wait_for_condition(kube_api, GROUP, "v1", PLURAL, kube_namespace, "tls", "Successful")
    old_shape = read(kube_api, kube_namespace, "v1alpha1", "tls")
    assert "tls" not in old_shape["spec"]
    assert json.loads(old_shape["metadata"]["annotations"][KEPT]) == {
        "/spec/tls": {"value": {"secret": "app-tls"}}
    }

    def replaced_through_v1alpha1() -> bool:
        """A client that knows only v1alpha1 replaces the object it read, annotation and
        all (read again when the operator's status write came first)."""
        current = read(kube_api, kube_namespace, "v1alpha1", "tls")
        current["spec"]["replicas"] = 4
        try:
            custom(kube_api).replace_namespaced_custom_object(
                GROUP, "v1alpha1", kube_namespace, PLURAL, "tls", current
            )
        except client.ApiException as error:
            if error.status == 409:
                return False
            raise
        return True

    eventually(replaced_through_v1alpha1, what="the object replaced through v1alpha1")
    hub = read(kube_api, kube_namespace, "v1", "tls")
    assert hub["spec"] == {"size": 4, "image": "app:1", "tls": {"secret": "app-tls"}}
    assert KEPT not in (hub["metadata"].get("annotations") or {})


def test_a_role_answering_wrongly_is_refused_naming_its_entry(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    for name in ("a", "b"):
        create(kube_api, kube_namespace, "v1", name, {"size": 1})
    wrong_version = refused(kube_api, kube_namespace, "v3", "a")
    assert "watches.yaml:" in wrong_version and "(v3, role)" in wrong_version
    assert "apiVersion is 'conversion.test.io/v9', not 'conversion.test.io/v3'" in wrong_version
    dropped = refused(kube_api, kube_namespace, "v4")
    assert "(v4, role)" in dropped and "objects given" in dropped
    assert "return every object, in the order given" in dropped
    renamed = refused(kube_api, kube_namespace, "v5", "a")
    assert "(v5, role)" in renamed
    assert "metadata.name changed from 'a' to 'someone-else'" in renamed
    # Nothing wrong reached the API server: the objects read as before in the others.
    assert read(kube_api, kube_namespace, "v1alpha1", "a")["spec"] == {"replicas": 1}
    assert (
        operator.metric(
            "ansible_operator_conversion_reviews_total",
            kind=f"{KIND}.{GROUP}",
            version="v5",
            result="failed",
        )
        >= 1
    )


def test_the_crd_stanza_is_put_back_when_someone_replaces_it(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    extensions = client.ApiextensionsV1Api(kube_api)
    served = extensions.read_custom_resource_definition(CRD_NAME).spec.conversion.webhook
    assert served.conversion_review_versions == ["v1"]
    assert served.client_config.url.endswith(f"/convert/gadget.{GROUP}")
    assert served.client_config.ca_bundle
    # As a re-applied manifest would: the stanza gone (strategy None, which loses fields).
    extensions.patch_custom_resource_definition(
        CRD_NAME, {"spec": {"conversion": {"strategy": "None", "webhook": None}}}
    )

    def stanza() -> Any:
        return extensions.read_custom_resource_definition(CRD_NAME).spec.conversion

    eventually(
        lambda: (
            stanza().strategy == "Webhook"
            and stanza().webhook.client_config.url == served.client_config.url
        ),
        what="the conversion stanza applied again",
        timeout=60,
    )
    create(kube_api, kube_namespace, "v1alpha1", "after", {"replicas": 2})
    assert read(kube_api, kube_namespace, "v1", "after")["spec"] == {"size": 2}
