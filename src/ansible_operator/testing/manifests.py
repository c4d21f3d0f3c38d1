"""Applying YAML manifests in tests (server-side apply), and waiting for CRDs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, dynamic

from ansible_operator.testing.waiting import eventually

FIELD_MANAGER = "ansible-operator-tests"


def documents(source: str | Path) -> list[dict[str, Any]]:
    text = source.read_text() if isinstance(source, Path) else source
    return [doc for doc in yaml.safe_load_all(text) if doc]


def schemaless_crd(
    group: str,
    kind: str,
    plural: str,
    *,
    version: str = "v1",
    scope: str = "Namespaced",
) -> dict[str, Any]:
    """A CRD for `kind` that takes any spec and status (with a status
    subresource): the quickest real kind for a test's watches.yaml."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": scope,
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }


def apply_manifests(
    api: client.ApiClient,
    source: str | Path,
    namespace: str | None = None,
    *,
    dry_run: bool = False,
) -> list[dict[str, Any]]:
    """Server-side apply every document; CRDs first, and wait until they are
    served. `dry_run`: the server validates and admits everything, stores nothing."""
    docs = documents(source)
    crds = [d for d in docs if d.get("kind") == "CustomResourceDefinition"]
    others = [d for d in docs if d.get("kind") != "CustomResourceDefinition"]
    applied = [_apply(api, doc, namespace, dry_run) for doc in crds]
    if crds and not dry_run:
        wait_crds_established(api, [d["metadata"]["name"] for d in crds])
    applied += [_apply(api, doc, namespace, dry_run) for doc in others]
    return applied


def _apply(
    api: client.ApiClient, doc: dict[str, Any], namespace: str | None, dry_run: bool = False
) -> dict[str, Any]:
    resources = dynamic.DynamicClient(api).resources
    resource = resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
    target_namespace = None
    if resource.namespaced:
        target_namespace = doc.get("metadata", {}).get("namespace") or namespace or "default"
    result = resource.server_side_apply(
        body=doc,
        namespace=target_namespace,
        field_manager=FIELD_MANAGER,
        force_conflicts=True,
        **({"dry_run": "All"} if dry_run else {}),
    )
    return result.to_dict()


def wait_crds_established(api: client.ApiClient, names: list[str], timeout: float = 60) -> None:
    extensions = client.ApiextensionsV1Api(api)

    def established() -> bool:
        for name in names:
            crd = extensions.read_custom_resource_definition(name)
            if not any(
                c.type == "Established" and c.status == "True" for c in crd.status.conditions or []
            ):
                return False
        return True

    eventually(established, timeout=timeout, what=f"CRDs established: {', '.join(names)}")
