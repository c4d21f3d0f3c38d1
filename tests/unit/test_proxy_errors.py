"""The proxy's own answers when it cannot do its job, as a run's Kubernetes
client sees them: Kubernetes Status bodies that say what went wrong; and which
answers of the API server it streams rather than holds."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from ansible_operator.kube.client import ApiError
from ansible_operator.kube.config import KubeConfig
from ansible_operator.kube.discovery import UnknownResource
from ansible_operator.kube.types import Owner, Resource
from ansible_operator.proxy.paths import parse_resource_path
from ansible_operator.proxy.rules.forward import BUFFERED_BODY, relayed_as_it_comes
from ansible_operator.proxy.server import ApiProxy

CONFIGMAPS = "/api/v1/namespaces/team/configmaps"
OWNER = Owner("cache.example.com", "v1alpha1", "Memcached", "team", "mc", "uid-1")


class Discovery:
    """A RestMapper whose discovery answers with `outcome` (raised if an exception)."""

    def __init__(self, outcome: Resource | Exception) -> None:
        self.outcome = outcome

    async def resource_for_plural(self, group: str, version: str, plural: str) -> Resource:
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome


@pytest.fixture
def discovery() -> Discovery:
    return Discovery(Resource("", "v1", "ConfigMap", "configmaps", True))


class Run:
    """A run's side of the proxy: its token, and the requests it sends."""

    def __init__(self, proxy: ApiProxy, port: int) -> None:
        self.proxy = proxy
        self.url = f"http://127.0.0.1:{port}"
        self.token = proxy.grant(OWNER).kubeconfig["users"][0]["user"]["token"]

    async def send(self, method: str, path: str, **extra: Any) -> tuple[int, dict[str, Any]]:
        headers = {"Authorization": f"Bearer {self.token}", **extra.pop("headers", {})}
        async with (
            aiohttp.ClientSession() as session,
            session.request(method, self.url + path, headers=headers, **extra) as answer,
        ):
            return answer.status, await answer.json(content_type=None)


@pytest.fixture
async def run(discovery: Discovery) -> AsyncIterator[Run]:
    # Port 1 on loopback: nothing listens, the API server is unreachable.
    config = KubeConfig(server="http://127.0.0.1:1", ssl=False)
    proxy = ApiProxy(config, discovery, port=0)  # type: ignore[arg-type]
    port = await proxy.start()
    try:
        yield Run(proxy, port)
    finally:
        await proxy.stop()


async def test_a_failed_discovery_refuses_the_write_rather_than_send_it_unmarked(
    discovery: Discovery, run: Run
) -> None:
    discovery.outcome = ApiError(500, "InternalError", "etcd is down")

    status, body = await run.send("POST", CONFIGMAPS, json={"metadata": {"name": "x"}})

    assert status == 503
    assert (body["kind"], body["status"], body["reason"]) == (
        "Status",
        "Failure",
        "ServiceUnavailable",
    )
    assert CONFIGMAPS in body["message"] and "etcd is down" in body["message"]
    assert run.proxy.stats["forwarded"] == 0


async def test_a_kind_the_server_does_not_serve_is_forwarded_for_the_server_to_say(
    discovery: Discovery, run: Run
) -> None:
    discovery.outcome = UnknownResource("the API server does not serve widgets")

    status, body = await run.send("GET", "/apis/example.com/v1/widgets")

    assert run.proxy.stats["forwarded"] == 1
    assert status == 502  # here the server is unreachable: that is what the run learns
    assert (body["kind"], body["reason"]) == ("Status", "BadGateway")
    assert body["message"].startswith("API server unreachable")


async def test_a_request_without_the_runs_token_gets_an_unauthorized_status(run: Run) -> None:
    status, body = await run.send("GET", CONFIGMAPS, headers={"Authorization": "Bearer forged"})
    assert status == 401
    assert (body["kind"], body["code"], body["reason"]) == ("Status", 401, "Unauthorized")


async def test_an_upgrade_other_than_websocket_is_not_implemented(run: Run) -> None:
    status, body = await run.send(
        "POST",
        "/api/v1/namespaces/team/pods/web/exec",
        headers={"Upgrade": "SPDY/3.1", "Connection": "Upgrade"},
    )
    assert status == 501
    assert (body["kind"], body["reason"]) == ("Status", "NotImplemented")
    assert "WebSocket" in body["message"]


NAMED = parse_resource_path("/api/v1/namespaces/team/configmaps/x")


@pytest.mark.parametrize(
    ("method", "target", "watching", "length", "streamed"),
    [
        ("GET", NAMED, True, None, True),
        ("GET", NAMED, False, 1000, False),
        ("GET", NAMED, False, BUFFERED_BODY + 1, True),
        ("GET", NAMED, False, None, True),
        ("POST", NAMED, False, None, False),
        ("PATCH", NAMED, False, BUFFERED_BODY + 1, False),
        ("DELETE", NAMED, False, None, False),
        ("POST", None, False, None, True),
    ],
    ids=[
        "a watch",
        "a small read",
        "a large read",
        "a read of unknown size",
        "a write: its answer feeds the cache",
        "a large write answer",
        "a delete",
        "a request outside the resource paths",
    ],
)
def test_which_answers_are_streamed_through(
    method: str, target: Any, watching: bool, length: int | None, streamed: bool
) -> None:
    assert relayed_as_it_comes(method, target, watching, length) is streamed
