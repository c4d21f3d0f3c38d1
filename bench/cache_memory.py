"""Memory per cached object: N objects of each kind through an Informer, held
as decoded dicts and packed (kube/transform.py), side by side.

    .venv/bin/python bench/cache_memory.py [--objects 10000]

The kinds: a custom object as the API server returns it after `kubectl apply`
and a few reconciles (managedFields of kubectl's client-side apply and of the
operator's status writes, the last-applied annotation, a spec of ten fields, a
status with the operator's conditions), and the dependents bench/scale.py's
role creates for each of its objects (a Deployment, a Service, a ConfigMap, as
the API server returns them after kubernetes.core's `k8s` created them). Each
enters the informer as the real client hands it over: decoded from its own
JSON, through the watch path (`_apply`, one decode per event: the steady
state, every object changed once since the list) and through the list path
(`_relist`, one decode for all). Prints tracemalloc's bytes per object held,
the informer's own estimate (`held_bytes`, what `ansible_operator_cache_bytes`
reports) for comparison, and the CPU time per object to fill the store (JSON
decoding included) and to read it back (`get`, as the proxy and the
reconciler do).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import time
import tracemalloc
import uuid
from collections.abc import Callable
from typing import Any

from ansible_operator.kube import informer as informer_module
from ansible_operator.kube.informer import Informer
from ansible_operator.kube.transform import Held, hold, resource_version
from ansible_operator.kube.types import Resource

RESOURCE = Resource("bench.example.com", "v1", "Widget", "widgets", namespaced=True)
NAMESPACES = 1000
CREATED = "2026-11-26T23:29:15Z"
OWNER = "bench.ansible-operator.io/v1alpha1"


def _owned(
    index: int, kind: str, api_version: str, name: str, fields: dict[str, Any]
) -> dict[str, Any]:
    """Metadata as kubernetes.core's `k8s` leaves it on what the run created."""
    owner_uid = str(uuid.UUID(int=index))
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {
            "creationTimestamp": CREATED,
            "managedFields": [
                {
                    "apiVersion": api_version,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {
                        "f:metadata": {
                            "f:ownerReferences": {".": {}, f'k:{{"uid":"{owner_uid}"}}': {}}
                        },
                        **fields,
                    },
                    "manager": "OpenAPI-Generator",
                    "operation": "Update",
                    "time": CREATED,
                }
            ],
            "name": name,
            "namespace": f"team-{index % NAMESPACES:04d}",
            "ownerReferences": [
                {
                    "apiVersion": OWNER,
                    "blockOwnerDeletion": True,
                    "controller": True,
                    "kind": "Memcached",
                    "name": f"m-{index}",
                    "uid": owner_uid,
                }
            ],
            "resourceVersion": str(200_000 + index),
            "uid": str(uuid.UUID(int=1 << 64 | index)),
        },
    }


def deployment(index: int) -> dict[str, Any]:
    name = f"m-{index}"
    container = {
        "image": "memcached:1.6-alpine",
        "imagePullPolicy": "IfNotPresent",
        "name": "memcached",
        "ports": [{"containerPort": 11211, "protocol": "TCP"}],
        "resources": {},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }
    container_fields = {
        'k:{"name":"memcached"}': {
            ".": {},
            **{f"f:{key}": {} for key in container if key != "ports"},
            "f:ports": {
                ".": {},
                'k:{"containerPort":11211,"protocol":"TCP"}': {
                    ".": {},
                    "f:containerPort": {},
                    "f:protocol": {},
                },
            },
        }
    }
    template_spec = {
        "dnsPolicy": "ClusterFirst",
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "terminationGracePeriodSeconds": 30,
    }
    spec_fields = {
        "f:progressDeadlineSeconds": {},
        "f:replicas": {},
        "f:revisionHistoryLimit": {},
        "f:selector": {},
        "f:strategy": {
            "f:rollingUpdate": {".": {}, "f:maxSurge": {}, "f:maxUnavailable": {}},
            "f:type": {},
        },
        "f:template": {
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {
                "f:containers": container_fields,
                **{f"f:{key}": {} for key in template_spec},
            },
        },
    }
    obj = _owned(index, "Deployment", "apps/v1", name, {"f:spec": spec_fields})
    obj["metadata"]["generation"] = 1
    obj["spec"] = {
        "progressDeadlineSeconds": 600,
        "replicas": index % 7 + 1,
        "revisionHistoryLimit": 10,
        "selector": {"matchLabels": {"app": name}},
        "strategy": {
            "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"},
            "type": "RollingUpdate",
        },
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"containers": [container], **template_spec},
        },
    }
    obj["status"] = {}
    return obj


def service(index: int) -> dict[str, Any]:
    name = f"m-{index}"
    ip = f"10.0.{index // 250 % 250}.{index % 250 + 1}"
    port_fields = {".": {}, "f:port": {}, "f:protocol": {}, "f:targetPort": {}}
    spec_fields = {
        "f:internalTrafficPolicy": {},
        "f:ports": {".": {}, 'k:{"port":11211,"protocol":"TCP"}': port_fields},
        "f:selector": {},
        "f:sessionAffinity": {},
        "f:type": {},
    }
    obj = _owned(index, "Service", "v1", name, {"f:spec": spec_fields})
    obj["spec"] = {
        "clusterIP": ip,
        "clusterIPs": [ip],
        "internalTrafficPolicy": "Cluster",
        "ipFamilies": ["IPv4"],
        "ipFamilyPolicy": "SingleStack",
        "ports": [{"port": 11211, "protocol": "TCP", "targetPort": 11211}],
        "selector": {"app": name},
        "sessionAffinity": "None",
        "type": "ClusterIP",
    }
    obj["status"] = {"loadBalancer": {}}
    return obj


def config_map(index: int) -> dict[str, Any]:
    fields = {"f:data": {".": {}, "f:size": {}}}
    obj = _owned(index, "ConfigMap", "v1", f"m-{index}-config", fields)
    obj["data"] = {"size": str(index % 7 + 1)}
    return obj


def realistic(index: int) -> dict[str, Any]:
    """One object as the API server returns it after `kubectl apply` and reconciles."""
    namespace = f"team-{index % NAMESPACES:04d}"
    name = f"widget-{index:05d}"
    spec = {
        "size": index % 7 + 1,
        "image": "registry.example.com/widgets/widget:1.4.2",
        "replicas": 3,
        "port": 8080,
        "logLevel": "info",
        "storageClass": "standard",
        "storageSize": "10Gi",
        "enableMetrics": True,
        "owner": f"team-{index % NAMESPACES:04d}@example.com",
        "tier": ("frontend", "backend", "cache")[index % 3],
    }
    applied = {
        "apiVersion": "bench.example.com/v1",
        "kind": "Widget",
        "metadata": {"annotations": {}, "name": name, "namespace": namespace},
        "spec": spec,
    }
    spec_fields = {f"f:{key}": {} for key in spec}
    conditions = [
        {
            "type": condition,
            "status": "True" if condition == "Successful" else "False",
            "reason": "Successful" if condition == "Successful" else "Running",
            "message": "Awaiting next reconciliation" if condition == "Successful" else "",
            "lastTransitionTime": f"2024-05-01T10:00:0{number}Z",
            **(
                {
                    "ansibleResult": {
                        "ok": 4,
                        "changed": 0,
                        "skipped": 1,
                        "failures": 0,
                        "completion": "2024-05-01T10:00:05.123456",
                    }
                }
                if condition == "Successful"
                else {}
            ),
        }
        for number, condition in enumerate(("Running", "Successful", "Failure"))
    ]
    return {
        "apiVersion": "bench.example.com/v1",
        "kind": "Widget",
        "metadata": {
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": json.dumps(
                    applied, separators=(",", ":")
                )
                + "\n"
            },
            "creationTimestamp": "2024-05-01T10:00:00Z",
            "finalizers": ["bench.example.com/cleanup"],
            "generation": 1,
            "labels": {"app.kubernetes.io/name": "widget", "tier": spec["tier"]},
            "managedFields": [
                {
                    "apiVersion": "bench.example.com/v1",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {
                        "f:metadata": {
                            "f:annotations": {
                                ".": {},
                                "f:kubectl.kubernetes.io/last-applied-configuration": {},
                            },
                            "f:labels": {".": {}, "f:app.kubernetes.io/name": {}, "f:tier": {}},
                        },
                        "f:spec": {".": {}, **spec_fields},
                    },
                    "manager": "kubectl-client-side-apply",
                    "operation": "Update",
                    "time": "2024-05-01T10:00:00Z",
                },
                {
                    "apiVersion": "bench.example.com/v1",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {
                        "f:metadata": {
                            "f:finalizers": {".": {}, 'v:"bench.example.com/cleanup"': {}}
                        }
                    },
                    "manager": "ansible-operator",
                    "operation": "Update",
                    "time": "2024-05-01T10:00:01Z",
                },
                {
                    "apiVersion": "bench.example.com/v1",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {
                        "f:status": {
                            ".": {},
                            "f:conditions": {},
                            "f:observedGeneration": {},
                        }
                    },
                    "manager": "ansible-operator",
                    "operation": "Update",
                    "subresource": "status",
                    "time": "2024-05-01T10:00:05Z",
                },
            ],
            "name": name,
            "namespace": namespace,
            "resourceVersion": str(100_000 + index),
            "uid": str(uuid.UUID(int=index)),
        },
        "spec": spec,
        "status": {"conditions": conditions, "observedGeneration": 1},
    }


class _Listing:
    """The client's face the list path needs: one decoded answer."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    async def list(self, *_args: Any, **_kwargs: Any) -> dict[str, Any]:
        listing: dict[str, Any] = json.loads(self.body)
        return listing


def _measure(fill: Callable[[Informer], None], count: int) -> tuple[float, int, float, Informer]:
    """tracemalloc's bytes per object held after `fill`, the informer's
    estimate, CPU microseconds per object to fill (a second fill, untraced),
    and that second informer."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    informer = Informer(_Listing(b""), RESOURCE)  # type: ignore[arg-type]
    fill(informer)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    estimate = informer.held_bytes // count
    del informer
    gc.collect()
    filled = Informer(_Listing(b""), RESOURCE)  # type: ignore[arg-type]
    started = time.process_time()  # CPU: other work on the machine does not count
    fill(filled)
    elapsed = time.process_time() - started
    return (after - before) / count, estimate, elapsed / count * 1e6, filled


def _as_dicts(obj: dict[str, Any]) -> Held:
    """The store before packing: the decoded object itself."""
    return Held(resource_version(obj), 0, None, obj)


KINDS: dict[str, Callable[[int], dict[str, Any]]] = {
    "custom": realistic,
    "Deployment": deployment,
    "Service": service,
    "ConfigMap": config_map,
}


def _reads(informer: Informer, keys: list[tuple[str, str]]) -> float:
    """CPU microseconds per `get` of every object."""
    started = time.process_time()
    for namespace, name in keys:
        informer.get(namespace, name)
    return (time.process_time() - started) / len(keys) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=10_000)
    count = parser.parse_args().objects
    print(f"{count} objects of each kind over {NAMESPACES} namespaces; per object:")
    print(
        f"{'kind':<11} {'path':<6} {'held as':<7} {'tracemalloc B':>13} {'estimate B':>10} "
        f"{'fill us':>8} {'get us':>7}"
    )
    for kind, build in KINDS.items():
        objects = [build(index) for index in range(count)]
        keys = [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in objects]
        events = [json.dumps({"type": "ADDED", "object": o}).encode() for o in objects]
        listing = json.dumps({"metadata": {"resourceVersion": "1"}, "items": objects}).encode()
        del objects

        def by_watch(informer: Informer, events: list[bytes] = events) -> None:
            for event in events:
                informer._apply(json.loads(event))

        def by_list(informer: Informer, listing: bytes = listing) -> None:
            informer.api = _Listing(listing)  # type: ignore[assignment]
            asyncio.run(informer._relist(None))

        for path, fill in (("watch", by_watch), ("list", by_list)):
            for held_as, keep in (("dicts", _as_dicts), ("packed", hold)):
                informer_module.hold = keep  # type: ignore[assignment]
                traced, estimate, micros, informer = _measure(fill, count)
                print(
                    f"{kind:<11} {path:<6} {held_as:<7} {traced:>13,.0f} "
                    f"{estimate if keep is hold else '-':>10} {micros:>8,.1f} "
                    f"{_reads(informer, keys):>7,.1f}"
                )
    informer_module.hold = hold


if __name__ == "__main__":
    main()
