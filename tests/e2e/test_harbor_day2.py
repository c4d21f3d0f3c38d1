"""Harbor day-2 operations (without the image rewriting webhook).

HarborServerConfiguration (cluster scoped) health checks; the namespace
controller turning goharbor.io/* annotations into a PullSecretBinding; the
binding ensuring project and robot account in the registry, the
dockerconfigjson Secret and the service account's imagePullSecrets; and the
binding's finalizer undoing it; the proxy caches of spec.proxyCache (registry
endpoint + proxy-cache project) and the image rewriting that points at them.
The registry is a fake Harbor v2.0 API served by this test process, which
records what the roles asked of it.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import secrets
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
import yaml
from aiohttp import web
from kubernetes import client

from ansible_operator.testing.operator import OperatorProcess
from ansible_operator.testing.waiting import (
    condition_of,
    eventually,
    get_custom,
    wait_for_condition,
)

pytestmark = pytest.mark.cluster

GROUP, VERSION = "goharbor.io", "v1alpha1"
HSCS = "harborserverconfigurations"
SAMPLE = (
    Path(__file__).resolve().parents[2]
    / "config/samples/goharbor.io_v1alpha1_harborserverconfiguration.yaml"
)
BINDING = "harbor-pull-secret-binding"  # the name the namespace controller uses
SECRET = f"{BINDING}-dockerconfig"
ADMIN = ("admin", "Harbor12345")
RECONCILE_PERIOD = "ansible.sdk.operatorframework.io/reconcile-period"


# ----- a fake Harbor registry ---------------------------------------------------
@dataclass
class Registry:
    """One fake Harbor instance, served under /<prefix>/api/v2.0."""

    prefix: str
    healthy: bool = True
    projects: dict[str, int] = field(default_factory=dict)
    # A project's other fields as Harbor lists them: registry_id (a proxy cache), metadata.
    project_fields: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Images a proxy-cache project holds (pulled through it): project -> repository paths.
    repositories: dict[str, set[str]] = field(default_factory=dict)
    robots: dict[int, dict[str, Any]] = field(default_factory=dict)
    # Registry endpoints (/registries), the upstreams of proxy-cache projects.
    endpoints: dict[int, dict[str, Any]] = field(default_factory=dict)
    requests: list[tuple[str, str, dict[str, Any] | None]] = field(default_factory=list)

    def calls(self, method: str, path: str = "") -> list[tuple[str, str, dict[str, Any] | None]]:
        return [r for r in self.requests if r[0] == method and r[1].startswith(path)]


class FakeHarbor:
    """The Harbor v2.0 endpoints the roles call, on 127.0.0.1, in a thread."""

    def __init__(self) -> None:
        self.registries: dict[str, Registry] = {}
        self._ids = itertools.count(1)
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self.base_url = ""

    def registry(self) -> Registry:
        registry = Registry(prefix=f"r{uuid.uuid4().hex[:8]}")
        self.registries[registry.prefix] = registry
        return registry

    def add_project(
        self, registry: Registry, name: str, registry_id: int = 0, public: str = "false"
    ) -> int:
        registry.projects[name] = next(self._ids)
        registry.project_fields[name] = {"registry_id": registry_id, "metadata": {"public": public}}
        return registry.projects[name]

    def add_robot(self, registry: Registry, project: str, name: str) -> dict[str, Any]:
        robot = {
            "id": next(self._ids),
            "name": f"robot${project}+{name}",
            "level": "project",
            "secret": secrets.token_hex(8),
            "permissions": [
                {
                    "kind": "project",
                    "namespace": project,
                    "access": [{"resource": "repository", "action": "pull"}],
                }
            ],
        }
        registry.robots[robot["id"]] = robot
        return robot

    # -- lifecycle
    def start(self) -> FakeHarbor:
        app = web.Application()
        app.router.add_route("*", "/{registry}/api/v2.0/{path:.*}", self._handle)
        ready = threading.Event()

        async def serve() -> None:
            self._runner = web.AppRunner(app, access_log=None)
            await self._runner.setup()
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            await site.start()
            port = self._runner.addresses[0][1]
            self.base_url = f"http://127.0.0.1:{port}"
            ready.set()

        thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        thread.start()
        asyncio.run_coroutine_threadsafe(serve(), self._loop)
        assert ready.wait(10), "fake Harbor did not start"
        return self

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)

    # -- the API
    async def _handle(self, request: web.Request) -> web.Response:
        registry = self.registries.get(request.match_info["registry"])
        if registry is None:
            return web.json_response({"errors": [{"code": "NOT_FOUND"}]}, status=404)
        path = "/" + request.match_info["path"]
        body = await request.json() if request.can_read_body else None
        registry.requests.append((request.method, request.path_qs.split("/api/v2.0", 1)[1], body))
        if path == "/health":
            return self._health(registry)
        if request.headers.get("Authorization") != basic_auth(*ADMIN):
            return web.json_response({"errors": [{"code": "UNAUTHORIZED"}]}, status=401)
        if path == "/projects":
            return self._projects(registry, request, body)
        if path.startswith("/projects/"):
            return self._project(registry, request, body)
        if path == "/registries":
            return self._endpoints(registry, request, body)
        if path.startswith("/registries/"):
            return self._endpoint(registry, request, body, int(path.rsplit("/", 1)[1]))
        if path == "/robots":
            return self._robots(registry, request, body)
        if path.startswith("/robots/"):
            return self._robot(registry, request, int(path.rsplit("/", 1)[1]))
        return web.json_response({"errors": [{"code": "NOT_FOUND"}]}, status=404)

    @staticmethod
    def _health(registry: Registry) -> web.Response:
        state = "healthy" if registry.healthy else "unhealthy"
        return web.json_response(
            {
                "status": state,
                "components": [
                    {"name": "core", "status": "healthy"},
                    {"name": "database", "status": state},
                ],
            }
        )

    def _projects(self, registry: Registry, request: web.Request, body: Any) -> web.Response:
        if request.method == "GET":
            wanted = request.query.get("name", "")  # Harbor matches loosely
            return web.json_response(
                [
                    {"project_id": pid, "name": name, **registry.project_fields[name]}
                    for name, pid in registry.projects.items()
                    if wanted in name
                ]
            )
        name = body["project_name"]
        if name in registry.projects:
            return web.json_response({"errors": [{"code": "CONFLICT"}]}, status=409)
        registry_id = body.get("registry_id") or 0
        if registry_id and registry_id not in registry.endpoints:
            return error(400, f"registry {registry_id} not found")
        public = (body.get("metadata") or {}).get("public", "false")
        pid = self.add_project(registry, name, registry_id, public)
        return web.Response(status=201, headers={"Location": f"/api/v2.0/projects/{pid}"})

    @staticmethod
    def _project(registry: Registry, request: web.Request, body: Any) -> web.Response:
        """/projects/{id} (PUT, DELETE) and /projects/{name}/repositories[/{repository}]."""
        # The raw path: Harbor wants a repository's slashes encoded twice (a/b -> a%252Fb).
        _, _, rest = request.raw_path.partition("/api/v2.0/projects/")
        project, in_repositories, repositories = rest.partition("?")[0].partition("/repositories")
        if in_repositories:
            return FakeHarbor._repositories(registry, request, unquote(project), repositories)
        name = next((n for n, pid in registry.projects.items() if str(pid) == project), None)
        if name is None:
            return error(404, f"project {project} not found")
        if request.method == "PUT":
            registry.project_fields[name]["metadata"].update(body.get("metadata") or {})
            return web.Response(status=200)
        if request.method == "DELETE":
            if registry.repositories.get(name):
                return error(412, "the project contains repositories, can not be deleted")
            del registry.projects[name], registry.project_fields[name]
            return web.Response(status=200)
        return error(405, request.method)

    @staticmethod
    def _repositories(
        registry: Registry, request: web.Request, project: str, rest: str
    ) -> web.Response:
        held = registry.repositories.setdefault(project, set())
        if request.method == "GET" and not rest.strip("/"):
            return web.json_response([{"name": f"{project}/{path}"} for path in sorted(held)])
        once = unquote(rest.removeprefix("/"))
        if request.method != "DELETE" or "/" in once:  # encoded once: no such route
            return error(404, f"no route for {request.method} {request.raw_path}")
        if unquote(once) not in held:
            return error(404, f"repository {project}/{unquote(once)} not found")
        held.remove(unquote(once))
        return web.Response(status=200)

    def _endpoints(self, registry: Registry, request: web.Request, body: Any) -> web.Response:
        if request.method == "GET":
            # Harbor's exact match: ?q=name=<name>.
            key, _, wanted = request.query.get("q", "").partition("=")
            return web.json_response(
                [
                    masked(e)
                    for e in registry.endpoints.values()
                    if key != "name" or e["name"] == wanted
                ]
            )
        if any(e["name"] == body["name"] for e in registry.endpoints.values()):
            return error(409, f"registry {body['name']} already exists")
        endpoint = {
            "id": next(self._ids),
            "credential": {"type": "basic", "access_key": "", "access_secret": ""},
            "insecure": False,
            "description": "",
            **body,
        }
        registry.endpoints[endpoint["id"]] = endpoint
        location = f"/api/v2.0/registries/{endpoint['id']}"
        return web.Response(status=201, headers={"Location": location})

    @staticmethod
    def _endpoint(
        registry: Registry, request: web.Request, body: Any, endpoint_id: int
    ) -> web.Response:
        endpoint = registry.endpoints.get(endpoint_id)
        if endpoint is None:
            return error(404, f"registry {endpoint_id} not found")
        if request.method == "PUT":
            endpoint.update({k: body[k] for k in ("url", "insecure", "description") if k in body})
            for key in ("access_key", "access_secret"):
                if key in body:
                    endpoint["credential"][key] = body[key]
            return web.Response(status=200)
        if request.method == "DELETE":
            if any(f["registry_id"] == endpoint_id for f in registry.project_fields.values()):
                return error(412, f"registry {endpoint_id} is used by a proxy-cache project")
            del registry.endpoints[endpoint_id]
            return web.Response(status=200)
        return web.json_response(masked(endpoint))

    def _robots(self, registry: Registry, request: web.Request, body: Any) -> web.Response:
        if request.method == "GET":
            return web.json_response([public(r) for r in registry.robots.values()])
        project = body["permissions"][0]["namespace"]
        robot = self.add_robot(registry, project, body["name"])
        return web.json_response(robot, status=201)

    @staticmethod
    def _robot(registry: Registry, request: web.Request, robot_id: int) -> web.Response:
        robot = registry.robots.get(robot_id)
        if robot is None:
            return web.json_response({"errors": [{"code": "NOT_FOUND"}]}, status=404)
        if request.method == "PATCH":
            robot["secret"] = secrets.token_hex(8)
            return web.json_response({"secret": robot["secret"]})
        if request.method == "DELETE":
            del registry.robots[robot_id]
            return web.Response(status=200)
        return web.json_response(public(robot))


def error(status: int, message: str) -> web.Response:
    return web.json_response({"errors": [{"code": str(status), "message": message}]}, status=status)


def masked(endpoint: dict[str, Any]) -> dict[str, Any]:
    """A registry endpoint as Harbor shows it: never with its access secret."""
    return {**endpoint, "credential": {**endpoint["credential"], "access_secret": "*****"}}


def public(robot: dict[str, Any]) -> dict[str, Any]:
    """A robot as Harbor lists it: never with its secret."""
    return {k: v for k, v in robot.items() if k != "secret"}


def basic_auth(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


# ----- fixtures -------------------------------------------------------------------
@pytest.fixture(scope="module")
def harbor() -> Iterator[FakeHarbor]:
    fake = FakeHarbor().start()
    yield fake
    fake.stop()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The operator's run directories and artifacts (every task's result), kept to be read."""
    return tmp_path_factory.mktemp("runs")


@pytest.fixture(scope="module")
def operator(sample_operator: Callable[..., OperatorProcess], runs: Path) -> OperatorProcess:
    return sample_operator(
        "goharbor.io_harborserverconfigurations.yaml",
        "goharbor.io_pullsecretbindings.yaml",
        args=[f"--runner-dir={runs}"],
    )


@dataclass
class Setup:
    registry: Registry
    hsc: str


@pytest.fixture
def day2(
    operator: OperatorProcess,
    harbor: FakeHarbor,
    kube_api: client.ApiClient,
    kube_namespace: str,
) -> Iterator[Setup]:
    """A fresh fake registry, its admin credentials in a Secret and an HSC for it.

    Teardown takes the annotations off and waits for the bindings' finalizer,
    so that the namespace is not left Terminating once the operator stops."""
    core = client.CoreV1Api(kube_api)
    core.create_namespaced_secret(
        kube_namespace,
        client.V1Secret(
            metadata=client.V1ObjectMeta(name="harbor-admin"),
            string_data={"accessKey": ADMIN[0], "accessSecret": ADMIN[1]},
        ),
    )
    registry = harbor.registry()
    name = f"hsc-{registry.prefix}"
    create_hsc(kube_api, name, f"{harbor.base_url}/{registry.prefix}", kube_namespace)
    try:
        yield Setup(registry, name)
    finally:
        try:
            annotate(kube_api, kube_namespace, {key: None for key in ANNOTATIONS})
            eventually(
                lambda: not bindings(kube_api, kube_namespace),
                timeout=60,
                what="bindings removed at teardown",
            )
        finally:
            delete_hsc(kube_api, name)


ANNOTATIONS = (
    "goharbor.io/secret-issuer",
    "goharbor.io/project",
    "goharbor.io/robot",
    "goharbor.io/service-account",
)


def create_hsc(
    api: client.ApiClient, name: str, url: str, namespace: str, period: str | None = None
) -> None:
    client.CustomObjectsApi(api).create_cluster_custom_object(
        GROUP,
        VERSION,
        "harborserverconfigurations",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "HarborServerConfiguration",
            "metadata": {
                "name": name,
                "annotations": {RECONCILE_PERIOD: period} if period else {},
            },
            "spec": {
                "serverURL": url,
                "accessCredential": {"namespace": namespace, "accessSecretRef": "harbor-admin"},
            },
        },
    )


def get_hsc(api: client.ApiClient, name: str) -> dict[str, Any] | None:
    try:
        return client.CustomObjectsApi(api).get_cluster_custom_object(
            GROUP, VERSION, "harborserverconfigurations", name
        )
    except client.ApiException as error:
        if error.status == 404:
            return None
        raise


def patch_hsc(api: client.ApiClient, name: str, patch: dict[str, Any]) -> None:
    client.CustomObjectsApi(api).patch_cluster_custom_object(GROUP, VERSION, HSCS, name, patch)


def delete_hsc(api: client.ApiClient, name: str) -> None:
    """Delete and wait until its finalizer has run (it needs the operator)."""
    read_or_none(
        lambda: client.CustomObjectsApi(api).delete_cluster_custom_object(
            GROUP, VERSION, HSCS, name
        )
    )
    eventually(lambda: get_hsc(api, name) is None, timeout=60, what=f"HSC {name} deleted")


def annotate(api: client.ApiClient, namespace: str, annotations: dict[str, str | None]) -> None:
    client.CoreV1Api(api).patch_namespace(namespace, {"metadata": {"annotations": annotations}})


def bindings(api: client.ApiClient, namespace: str) -> list[dict[str, Any]]:
    return client.CustomObjectsApi(api).list_namespaced_custom_object(
        GROUP, VERSION, namespace, "pullsecretbindings"
    )["items"]


def bound(api: client.ApiClient, namespace: str) -> dict[str, Any]:
    """Wait for the namespace's binding to be reconciled successfully."""
    eventually(
        lambda: get_custom(api, GROUP, VERSION, "pullsecretbindings", namespace, BINDING),
        what="PullSecretBinding created by the namespace controller",
    )
    return wait_for_condition(
        api,
        GROUP,
        VERSION,
        "pullsecretbindings",
        namespace,
        BINDING,
        "Successful",
        predicate=lambda o: "secretName" in o["status"],
    )


def read_or_none(read: Callable[[], Any]) -> Any:
    try:
        return read()
    except client.ApiException as error:
        if error.status == 404:
            return None
        raise


def docker_auth(secret: client.V1Secret, host: str) -> dict[str, str]:
    config = json.loads(base64.b64decode(secret.data[".dockerconfigjson"]))
    return config["auths"][host]


def pull_secret_names(account: client.V1ServiceAccount | None) -> list[str]:
    return [ref.name for ref in (account.image_pull_secrets or [])] if account else []


# ----- HarborServerConfiguration --------------------------------------------------
def test_hsc_reports_a_healthy_registry_then_notices_it_failing(
    operator: OperatorProcess, harbor: FakeHarbor, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    registry = harbor.registry()
    name = f"hsc-{registry.prefix}"
    # A short period so the test sees the regular check (the watch says 30s).
    create_hsc(kube_api, name, f"{harbor.base_url}/{registry.prefix}", kube_namespace, "2s")
    try:

        def health(state: str) -> Callable[[], dict[str, Any] | None]:
            def check() -> dict[str, Any] | None:
                hsc = get_hsc(kube_api, name)
                ok = (hsc or {}).get("status", {}).get("serverStatus") == state
                return hsc if ok else None

            return check

        hsc = eventually(
            health("healthy"),
            describe=lambda: json.dumps((get_hsc(kube_api, name) or {}).get("status")),
            what="HSC healthy",
        )
        assert condition_of(hsc, "Healthy")["status"] == "True"
        assert registry.calls("GET", "/health")

        registry.healthy = False
        hsc = eventually(
            health("unhealthy"),
            describe=lambda: json.dumps((get_hsc(kube_api, name) or {}).get("status")),
            what="HSC unhealthy after the registry's health fails",
        )
        healthy = condition_of(hsc, "Healthy")
        assert healthy["status"] == "False"
        assert healthy["reason"] == "RegistryUnhealthy"
        assert "database" in healthy["message"]
        # An unhealthy registry is reported, not a failed reconciliation.
        failure = condition_of(hsc, "Failure")
        assert failure is None or failure["status"] == "False", failure
    finally:
        delete_hsc(kube_api, name)


# ----- namespace -> binding -> registry, Secret, service account ----------------------
def test_annotated_namespace_is_bound_with_default_project_and_service_account(
    day2: Setup, kube_api: client.ApiClient, kube_namespace: str, harbor: FakeHarbor
) -> None:
    annotate(kube_api, kube_namespace, {"goharbor.io/secret-issuer": day2.hsc})
    binding = bound(kube_api, kube_namespace)

    # The namespace controller's binding: defaults filled in, owned by the Namespace.
    assert binding["spec"]["harborServerConfig"] == day2.hsc
    assert binding["spec"]["project"] == kube_namespace
    assert binding["spec"]["serviceAccount"] == "default"
    assert binding["metadata"]["labels"]["goharbor.io/created-by"] == "namespace-binding"
    owner = binding["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"]) == ("Namespace", kube_namespace)

    # The registry: project created under the namespace's name, a pull robot for it.
    registry = day2.registry
    assert [b["project_name"] for _, _, b in registry.calls("POST", "/projects")] == [
        kube_namespace
    ]
    (robot,) = registry.robots.values()
    assert robot["permissions"][0]["namespace"] == kube_namespace
    assert binding["status"]["projectId"] == registry.projects[kube_namespace]
    assert binding["status"]["robotId"] == robot["id"]

    # The dockerconfigjson Secret carries the robot's credentials for the registry host.
    core = client.CoreV1Api(kube_api)
    secret = core.read_namespaced_secret(SECRET, kube_namespace)
    assert secret.type == "kubernetes.io/dockerconfigjson"
    host = harbor.base_url.removeprefix("http://")
    auth = docker_auth(secret, host)
    assert (auth["username"], auth["password"]) == (robot["name"], robot["secret"])
    assert auth["auth"] == base64.b64encode(f"{robot['name']}:{robot['secret']}".encode()).decode()

    # The `default` service account (none existed: no SA controller here) pulls with it.
    account = core.read_namespaced_service_account("default", kube_namespace)
    assert pull_secret_names(account) == [SECRET]

    # Annotation removed: binding, Secret and robot go; the SA loses the entry
    # (the binding created this SA, so it goes with it).
    annotate(kube_api, kube_namespace, {"goharbor.io/secret-issuer": None})
    eventually(lambda: not bindings(kube_api, kube_namespace), what="binding removed")
    eventually(
        lambda: read_or_none(lambda: core.read_namespaced_secret(SECRET, kube_namespace)) is None,
        what="pull secret deleted",
    )
    eventually(
        lambda: (
            SECRET
            not in pull_secret_names(
                read_or_none(
                    lambda: core.read_namespaced_service_account("default", kube_namespace)
                )
            )
        ),
        what="service account cleaned",
    )
    assert registry.calls("DELETE", f"/robots/{robot['id']}")
    assert not registry.robots


def test_named_project_and_robot_bind_an_existing_service_account_and_unbind_cleanly(
    day2: Setup, kube_api: client.ApiClient, kube_namespace: str, harbor: FakeHarbor
) -> None:
    registry = day2.registry
    harbor.add_project(registry, "shared")
    robot = harbor.add_robot(registry, "shared", "ci")
    core = client.CoreV1Api(kube_api)
    core.create_namespaced_service_account(
        kube_namespace,
        client.V1ServiceAccount(
            metadata=client.V1ObjectMeta(name="builder"),
            image_pull_secrets=[client.V1LocalObjectReference(name="other")],
        ),
    )
    annotate(
        kube_api,
        kube_namespace,
        {
            "goharbor.io/secret-issuer": day2.hsc,
            "goharbor.io/project": "shared",
            "goharbor.io/robot": str(robot["id"]),
            "goharbor.io/service-account": "builder",
        },
    )
    binding = bound(kube_api, kube_namespace)
    assert binding["spec"]["robotId"] == str(robot["id"])
    assert binding["status"]["robotCreated"] is False

    # The existing project and robot are used: nothing created, the robot's
    # secret refreshed (Harbor shows a secret only when it is made).
    assert not registry.calls("POST")
    assert registry.calls("PATCH", f"/robots/{robot['id']}")
    secret = core.read_namespaced_secret(SECRET, kube_namespace)
    auth = docker_auth(secret, harbor.base_url.removeprefix("http://"))
    assert (auth["username"], auth["password"]) == (robot["name"], robot["secret"])
    account = core.read_namespaced_service_account("builder", kube_namespace)
    assert pull_secret_names(account) == ["other", SECRET]

    annotate(kube_api, kube_namespace, {key: None for key in ANNOTATIONS})
    eventually(lambda: not bindings(kube_api, kube_namespace), what="binding removed")
    assert read_or_none(lambda: core.read_namespaced_secret(SECRET, kube_namespace)) is None
    account = core.read_namespaced_service_account("builder", kube_namespace)
    assert pull_secret_names(account) == ["other"]
    # The user's robot account stays in the registry.
    assert not registry.calls("DELETE")
    assert robot["id"] in registry.robots


def test_project_annotation_without_robot_fails_with_a_clear_message(
    day2: Setup, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    annotate(
        kube_api,
        kube_namespace,
        {"goharbor.io/secret-issuer": day2.hsc, "goharbor.io/project": "elsewhere"},
    )
    core = client.CoreV1Api(kube_api)

    def warning() -> str | None:
        # Events about cluster-scoped objects live in `default`.
        events = core.list_namespaced_event(
            "default",
            field_selector=f"involvedObject.kind=Namespace,involvedObject.name={kube_namespace}",
        ).items
        return next((e.message for e in events if e.type == "Warning"), None)

    message = eventually(warning, what="Warning event on the Namespace")
    assert "goharbor.io/robot" in message
    assert "goharbor.io/project" in message
    assert not bindings(kube_api, kube_namespace)
    assert not day2.registry.calls("POST")


# ----- proxy cache (spec.proxyCache) ----------------------------------------------------
HUB = {
    "name": "hub",
    "type": "docker-hub",
    "endpointURL": "https://hub.docker.com",
    "project": "hub-proxy",
    "accessCredential": {"accessSecretRef": "hub-pull"},  # namespace: the test's
}
HUB_RULE = {"registryRegex": "^docker.io$", "proxyCache": "hub"}


def hub_credentials(api: client.ApiClient, namespace: str) -> tuple[str, str, client.V1Secret]:
    """A Docker Hub user and access token in a Secret, as the sample has them."""
    key, token = f"hub-user-{secrets.token_hex(4)}", f"dckr_pat_{secrets.token_hex(12)}"
    secret = client.CoreV1Api(api).create_namespaced_secret(
        namespace,
        client.V1Secret(
            metadata=client.V1ObjectMeta(name="hub-pull"),
            string_data={"accessKey": key, "accessSecret": token},
        ),
    )
    return key, token, secret


def hub_entry(namespace: str, **changes: Any) -> dict[str, Any]:
    credential = {**HUB["accessCredential"], "namespace": namespace}
    return {**HUB, "accessCredential": credential, **changes}


def proxy_cache_ready(api: client.ApiClient, name: str, entries: int) -> dict[str, Any]:
    def ready() -> dict[str, Any] | None:
        hsc = get_hsc(api, name) or {}
        condition = condition_of(hsc, "ProxyCacheReady") or {}
        listed = (hsc.get("status") or {}).get("proxyCache")
        return hsc if condition.get("status") == "True" and len(listed or []) == entries else None

    return eventually(
        ready,
        timeout=60,
        describe=lambda: json.dumps((get_hsc(api, name) or {}).get("status")),
        what=f"ProxyCacheReady with {entries} entries",
    )


def files_containing(root: Path, text: str) -> list[Path]:
    return [
        path for path in root.rglob("*") if path.is_file() and text.encode() in path.read_bytes()
    ]


def dry_run_images(api: client.ApiClient, namespace: str, image: str) -> list[str]:
    """The images of a Pod as the API server would store it (webhooks applied)."""
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name=f"pod-{uuid.uuid4().hex[:6]}"),
        spec=client.V1PodSpec(containers=[client.V1Container(name="c", image=image)]),
    )
    stored = client.CoreV1Api(api).create_namespaced_pod(namespace, pod, dry_run="All")
    return [c.image for c in stored.spec.containers]


def test_the_sample_configuration_is_valid_and_rules_name_one_destination(
    operator: OperatorProcess, kube_api: client.ApiClient
) -> None:
    (sample,) = [
        doc
        for doc in yaml.safe_load_all(SAMPLE.read_text())
        if doc["kind"] == "HarborServerConfiguration"
    ]
    custom = client.CustomObjectsApi(kube_api)
    stored = custom.create_cluster_custom_object(GROUP, VERSION, HSCS, sample, dry_run="All")
    assert stored["spec"]["proxyCache"][0]["public"] is True  # the CRD's default

    both = {"registryRegex": "^docker.io$", "project": "p", "proxyCache": "dockerhub"}
    invalid = {**sample, "spec": {**sample["spec"], "rules": [both]}}
    with pytest.raises(client.ApiException) as rejected:
        custom.create_cluster_custom_object(GROUP, VERSION, HSCS, invalid, dry_run="All")
    assert rejected.value.status == 422
    assert "spec.rules[0]" in rejected.value.body


def test_proxy_cache_entry_makes_endpoint_and_project_rewrites_pods_and_goes_when_removed(
    day2: Setup,
    kube_api: client.ApiClient,
    kube_namespace: str,
    harbor: FakeHarbor,
    operator: OperatorProcess,
    runs: Path,
) -> None:
    registry = day2.registry
    key, token, secret = hub_credentials(kube_api, kube_namespace)
    patch_hsc(
        kube_api,
        day2.hsc,
        {"spec": {"proxyCache": [hub_entry(kube_namespace)], "rules": [HUB_RULE]}},
    )
    hsc = proxy_cache_ready(kube_api, day2.hsc, entries=1)

    # Harbor: a Docker Hub endpoint with the Secret's credentials, a public proxy-cache
    # project on it; the status names both by their IDs.
    (endpoint,) = registry.endpoints.values()
    assert (endpoint["name"], endpoint["type"], endpoint["url"]) == (
        "hub",
        "docker-hub",
        "https://hub.docker.com",
    )
    assert endpoint["credential"] == {"type": "basic", "access_key": key, "access_secret": token}
    assert registry.project_fields["hub-proxy"] == {
        "registry_id": endpoint["id"],
        "metadata": {"public": "true"},
    }
    assert hsc["status"]["proxyCache"] == [
        {
            "name": "hub",
            "registryId": endpoint["id"],
            "project": "hub-proxy",
            "projectId": registry.projects["hub-proxy"],
            "credentialVersion": secret.metadata.resource_version,
        }
    ]
    # The credentials went to Harbor and nowhere else: not status, log nor any run's record.
    for leaked in (key, token):
        assert leaked not in json.dumps(hsc)
        assert leaked not in operator.logs
        assert not files_containing(runs, leaked)

    # A Pod of a namespace using this configuration pulls Docker Hub's images through it.
    annotate(
        kube_api,
        kube_namespace,
        {"goharbor.io/image-rewrite": "auto", "goharbor.io/secret-issuer": day2.hsc},
    )
    host = harbor.base_url.removeprefix("http://")
    eventually(
        lambda: (
            dry_run_images(kube_api, kube_namespace, "nginx:1.25")
            == [f"{host}/hub-proxy/library/nginx:1.25"]
        ),
        describe=lambda: str(dry_run_images(kube_api, kube_namespace, "nginx:1.25")),
        what="Docker Hub image rewritten to the proxy-cache project",
    )

    # A change is an update in place; what did not change is left alone.
    patch_hsc(
        kube_api, day2.hsc, {"spec": {"proxyCache": [hub_entry(kube_namespace, public=False)]}}
    )
    eventually(
        lambda: registry.project_fields["hub-proxy"]["metadata"]["public"] == "false",
        what="project made private",
    )
    assert len(registry.calls("POST", "/registries")) == 1
    assert len([b for _, _, b in registry.calls("POST", "/projects") if b.get("registry_id")]) == 1
    assert not registry.calls("PUT", "/registries")

    # Removed: the images it cached, the project, then the endpoint go.
    registry.repositories["hub-proxy"] = {"library/nginx"}
    patch_hsc(kube_api, day2.hsc, {"spec": {"proxyCache": None, "rules": None}})
    hsc = proxy_cache_ready(kube_api, day2.hsc, entries=0)
    assert condition_of(hsc, "ProxyCacheReady")["reason"] == "NoProxyCache"
    assert "hub-proxy" not in registry.projects
    assert not registry.endpoints
    assert registry.calls("DELETE", "/projects/hub-proxy/repositories/library")
    eventually(
        lambda: dry_run_images(kube_api, kube_namespace, "nginx:1.25") == ["nginx:1.25"],
        what="images no longer rewritten to the removed proxy cache",
    )


def test_deleting_the_configuration_deletes_its_proxy_caches(
    day2: Setup, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    registry = day2.registry
    hub_credentials(kube_api, kube_namespace)
    patch_hsc(kube_api, day2.hsc, {"spec": {"proxyCache": [hub_entry(kube_namespace)]}})
    proxy_cache_ready(kube_api, day2.hsc, entries=1)
    assert registry.endpoints and "hub-proxy" in registry.projects

    delete_hsc(kube_api, day2.hsc)

    assert not registry.endpoints
    assert "hub-proxy" not in registry.projects
