"""The proxy's pipeline without a server: rules run in their listed order
until one answers, and a write reaches the dependent registry before it is
sent and is settled before the run hears the answer."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from ansible_operator.kube.types import Owner, Resource
from ansible_operator.proxy.exchange import Exchange, Handler, Services
from ansible_operator.proxy.grants import Grant, Grants
from ansible_operator.proxy.paths import parse_resource_path
from ansible_operator.proxy.pipeline import LAST, RULES, chained
from ansible_operator.proxy.rules.after_write import after_write
from ansible_operator.proxy.rules.authenticate import authenticate
from ansible_operator.proxy.rules.forward import forward
from ansible_operator.proxy.rules.read_only import refuse_writes_of_read_only_runs
from ansible_operator.proxy.writes import Write

DEPLOYMENTS = Resource("apps", "v1", "Deployment", "deployments", True)
OWNER = Owner("cache.example.com", "v1alpha1", "Memcached", "team", "mc", "uid-mc")
WEB = "/apis/apps/v1/namespaces/team/deployments/web"


class Registry:
    def __init__(self) -> None:
        self.reported: list[Write] = []

    def record(self, write: Write) -> None:
        self.reported.append(write)

    def reads_cached(self, resource: Resource, owner: Owner) -> bool:
        return True


def exchange_for(method: str, path: str, registry: Registry) -> Exchange:
    services = Services(
        config=None,  # type: ignore[arg-type]
        upstreams=None,  # type: ignore[arg-type]
        mapper=None,  # type: ignore[arg-type]
        grants=Grants(),
        cache=None,
        dependents=registry,
        inject_owner_ref=True,
        stats={},
    )
    exchange = Exchange(make_mocked_request(method, path), services, grant=Grant(OWNER))
    exchange.target = parse_resource_path(path)
    exchange.resource = DEPLOYMENTS
    return exchange


def answered(status: int, obj: dict[str, Any] | None = None) -> Handler:
    """The API server's side of a forward: answers `status` with `obj`."""

    async def forward(exchange: Exchange) -> web.StreamResponse:
        exchange.answer_body = json.dumps(obj or {}).encode()
        return web.Response(status=status, body=exchange.answer_body)

    return forward


def test_the_pipeline_starts_with_authentication_and_ends_with_forwarding() -> None:
    assert RULES[0] is authenticate
    assert RULES[-1] is after_write  # around the forward, the last step
    assert LAST is forward


async def test_rules_run_in_order_until_one_answers() -> None:
    seen: list[str] = []

    def rule(name: str, answers: bool) -> Any:
        async def handle(exchange: Exchange, pass_on: Handler) -> web.StreamResponse:
            seen.append(name)
            return web.Response(status=204) if answers else await pass_on(exchange)

        return handle

    async def last(exchange: Exchange) -> web.StreamResponse:
        seen.append("last")
        return web.Response()

    handler = chained([rule("a", False), rule("b", True), rule("c", False)], last)
    response = await handler(exchange_for("GET", WEB, Registry()))

    assert (response.status, seen) == (204, ["a", "b"])
    assert (await chained([], last)(exchange_for("GET", WEB, Registry()))).status == 200


async def test_a_write_is_reported_before_it_is_sent_and_settled_before_the_answer() -> None:
    registry = Registry()
    server = answered(200, {"kind": "Deployment", "metadata": {"resourceVersion": "7"}})

    async def sent(exchange: Exchange) -> web.StreamResponse:
        [write] = registry.reported
        assert (write.resource, write.owner, write.namespace, write.name) == (
            DEPLOYMENTS,
            OWNER,
            "team",
            "web",
        )
        assert not write.settled  # in flight while the server works on it
        return await server(exchange)

    response = await after_write(exchange_for("PATCH", WEB, registry), sent)

    [write] = registry.reported
    assert response.status == 200
    assert write.happened and write.object == {
        "kind": "Deployment",
        "metadata": {"resourceVersion": "7"},
    }


async def test_a_write_answered_with_something_else_than_the_object_happened_all_the_same() -> None:
    registry = Registry()
    await after_write(exchange_for("POST", WEB + "/eviction", registry), answered(201))
    [write] = registry.reported
    assert write.happened and write.object is None


@pytest.mark.parametrize("status", [409, 422, 500])
async def test_a_write_the_server_refuses_did_not_happen(status: int) -> None:
    registry = Registry()
    await after_write(exchange_for("PUT", WEB, registry), answered(status))
    [write] = registry.reported
    assert write.settled and not write.happened


async def test_a_write_abandoned_on_the_way_did_not_happen() -> None:
    registry = Registry()

    async def abandoned(exchange: Exchange) -> web.StreamResponse:
        raise asyncio.CancelledError  # the run hung up

    with pytest.raises(asyncio.CancelledError):
        await after_write(exchange_for("PATCH", WEB, registry), abandoned)
    [write] = registry.reported
    assert write.settled and not write.happened


async def test_reads_and_deletes_are_not_reported() -> None:
    registry = Registry()
    await after_write(exchange_for("GET", WEB, registry), answered(200))
    await after_write(exchange_for("DELETE", WEB, registry), answered(200))
    assert registry.reported == []


def preview_exchange(method: str, path: str) -> Exchange:
    exchange = exchange_for(method, path, Registry())
    exchange.grant = Grant(OWNER, dry_run=True)
    return exchange


@pytest.mark.parametrize(
    ("method", "path", "sent"),
    [
        ("GET", WEB, True),
        ("PATCH", WEB + "?dryRun=All&fieldManager=k8s", True),
        ("POST", "/apis/apps/v1/namespaces/team/deployments?dryRun=All", True),
        ("DELETE", WEB + "?dryRun=All", True),
        ("PATCH", WEB, False),
        ("POST", "/apis/apps/v1/namespaces/team/deployments", False),
        ("PUT", WEB + "?dryRun=None", False),
        ("DELETE", WEB, False),
    ],
)
async def test_a_preview_sends_only_reads_and_server_side_dry_runs(
    method: str, path: str, sent: bool
) -> None:
    """`reconcile --check`: whatever a role does, nothing it writes is stored."""
    forwarded: list[str] = []

    async def server(exchange: Exchange) -> web.StreamResponse:
        forwarded.append(exchange.method)
        return web.Response(status=200, body=b"{}")

    response = await chained([refuse_writes_of_read_only_runs], server)(
        preview_exchange(method, path)
    )

    assert (bool(forwarded), response.status) == (sent, 200 if sent else 403)
    if not sent:
        assert b"this run is a preview (reconcile --check)" in response.body


async def test_a_previews_dry_run_write_is_no_dependent_write() -> None:
    registry = Registry()
    exchange = exchange_for("PATCH", WEB + "?dryRun=All", registry)
    exchange.grant = Grant(OWNER, dry_run=True)
    await after_write(exchange, answered(200, {"kind": "Deployment", "metadata": {}}))
    assert registry.reported == []


async def test_an_rbac_refusal_is_recorded_for_the_run_it_answers() -> None:
    from ansible_operator.proxy.rules.refusals import record_refusals
    from ansible_operator.runner.rbac_refusal import RbacRefusal

    message = (
        'deployments.apps "web" is forbidden: User "system:serviceaccount:ops:op" cannot '
        'patch resource "deployments" in API group "apps" in the namespace "team"'
    )
    exchange = exchange_for("PATCH", WEB, Registry())
    await record_refusals(exchange, answered(403, {"kind": "Status", "message": message}))
    other = exchange_for("PATCH", WEB, Registry())
    await record_refusals(other, answered(422, {"kind": "Status", "message": message}))

    assert exchange.run.refusals.between(None, None) == [
        RbacRefusal("system:serviceaccount:ops:op", "patch", "apps", "deployments", "team")
    ]
    assert other.run.refusals.between(None, None) == []
