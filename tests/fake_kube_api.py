"""A small fake Kubernetes API server over HTTP, for running the
operator_sdk.util modules through ansible-playbook without a cluster (the
unit tests' in-process API is `ansible_operator.testing.fake_api`, whose merge
patch this uses).

It serves discovery for a few kinds, stores objects in memory, and applies
GET, POST, PUT and JSON merge PATCH (with resourceVersion preconditions) on
objects and their /status. Every request is recorded, with its headers and
whether it came through an HTTP proxy.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ansible_operator.testing.fake_api import merge_patch

GROUP, VERSION = "test.example.com", "v1"


@dataclass(frozen=True)
class Kind:
    plural: str
    kind: str
    singular: str
    short_names: tuple[str, ...] = ()
    status: bool = True


CORE = (
    Kind("pods", "Pod", "pod", ("po",)),
    Kind("events", "Event", "event", ("ev",), status=False),
)
GROUPED = (
    Kind("widgets", "Widget", "widget", ("wd",)),
    Kind("gadgets", "Gadget", "gadget", status=False),
)


def resource_list(group_version: str, kinds: tuple[Kind, ...]) -> dict[str, Any]:
    resources = []
    verbs = ["create", "delete", "get", "list", "patch", "update", "watch"]
    for kind in kinds:
        resources.append(
            {
                "name": kind.plural,
                "singularName": kind.singular,
                "namespaced": True,
                "kind": kind.kind,
                "shortNames": list(kind.short_names),
                "verbs": verbs,
            }
        )
        if kind.status:
            resources.append(
                {
                    "name": f"{kind.plural}/status",
                    "singularName": "",
                    "namespaced": True,
                    "kind": kind.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
    return {"kind": "APIResourceList", "groupVersion": group_version, "resources": resources}


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]  # names in lower case
    body: Any
    proxied: bool


@dataclass
class FakeKubeAPI:
    url: str = ""
    objects: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    # When set, requests without exactly this Authorization header get 401.
    authorization: str | None = None
    _version: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            obj = copy.deepcopy(obj)
            self._stamp(obj)
            metadata = obj["metadata"]
            self.objects[(plural, metadata["namespace"], metadata["name"])] = obj
            return obj

    def get(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get((plural, namespace, name))

    def writes(self) -> list[Request]:
        return [r for r in self.requests if r.method in ("POST", "PUT", "PATCH")]

    def _stamp(self, obj: dict[str, Any]) -> None:
        self._version += 1
        metadata = obj.setdefault("metadata", {})
        metadata["resourceVersion"] = str(self._version)
        metadata.setdefault("uid", f"uid-{metadata.get('name')}")

    # ----- request handling --------------------------------------------------
    def handle(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        path = path.split("?", 1)[0]
        if method == "GET" and path == "/version":
            return 200, {"major": "1", "minor": "30", "gitVersion": "v1.30.0"}
        if method == "GET" and path == "/api":
            return 200, {"kind": "APIVersions", "versions": ["v1"]}
        if method == "GET" and path == "/apis":
            version = {"groupVersion": f"{GROUP}/{VERSION}", "version": VERSION}
            return 200, {
                "kind": "APIGroupList",
                "groups": [{"name": GROUP, "versions": [version], "preferredVersion": version}],
            }
        if method == "GET" and path == "/api/v1":
            return 200, resource_list("v1", CORE)
        if method == "GET" and path == f"/apis/{GROUP}/{VERSION}":
            return 200, resource_list(f"{GROUP}/{VERSION}", GROUPED)
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "v1"]:
            rest = parts[2:]
        elif parts[:3] == ["apis", GROUP, VERSION]:
            rest = parts[3:]
        else:
            return _status(404, "NotFound", f"the server could not find {path}")
        if len(rest) < 3 or rest[0] != "namespaces":
            return _status(404, "NotFound", f"the server could not find {path}")
        namespace, plural, tail = rest[1], rest[2], rest[3:]
        with self._lock:
            return self._object(method, plural, namespace, tail, body)

    def _object(
        self, method: str, plural: str, namespace: str, tail: list[str], body: Any
    ) -> tuple[int, Any]:
        if not tail:
            if method != "POST":
                return _status(405, "MethodNotAllowed", "not supported here")
            name = body["metadata"]["name"]
            if (plural, namespace, name) in self.objects:
                return _status(409, "AlreadyExists", f'{plural} "{name}" already exists')
            obj = copy.deepcopy(body)
            obj["metadata"]["namespace"] = namespace
            self._stamp(obj)
            self.objects[(plural, namespace, name)] = obj
            return 201, obj
        name, subresource = tail[0], tail[1] if len(tail) > 1 else ""
        current = self.objects.get((plural, namespace, name))
        if current is None:
            return _status(404, "NotFound", f'{plural} "{name}" not found')
        if method == "GET":
            return 200, current
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if (
            method in ("PUT", "PATCH")
            and wanted
            and wanted != current["metadata"]["resourceVersion"]
        ):
            return _status(
                409, "Conflict", "the object has been modified; please apply your changes"
            )
        if method == "PATCH":
            if subresource == "status":
                updated = copy.deepcopy(current)
                if "status" in body:
                    updated["status"] = merge_patch(current.get("status"), body["status"])
            else:
                patch = {k: v for k, v in body.items() if k != "metadata"}
                updated = merge_patch(current, patch)
        elif method == "PUT":
            if subresource == "status":
                updated = copy.deepcopy(current)
                updated["status"] = copy.deepcopy(body.get("status"))
            else:
                updated = copy.deepcopy(body)
                updated["metadata"] = copy.deepcopy(current["metadata"])
        else:
            return _status(405, "MethodNotAllowed", "not supported here")
        self._stamp(updated)
        self.objects[(plural, namespace, name)] = updated
        return 200, updated


def _status(code: int, reason: str, message: str) -> tuple[int, dict[str, Any]]:
    return code, {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


@contextmanager
def serve() -> Iterator[FakeKubeAPI]:
    api = FakeKubeAPI()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else {}
            path, proxied = self.path, False
            if path.startswith("http://"):
                # An HTTP proxy is sent the whole URL.
                path, proxied = "/" + path.split("/", 3)[3], True
            api.requests.append(
                Request(
                    self.command,
                    path,
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                    proxied,
                )
            )
            if api.authorization is not None and self.headers.get("Authorization") != (
                api.authorization
            ):
                code, answer = _status(401, "Unauthorized", "Unauthorized")
            else:
                code, answer = api.handle(self.command, path, body)
            data = json.dumps(answer).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_PATCH = _serve

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    api.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()
