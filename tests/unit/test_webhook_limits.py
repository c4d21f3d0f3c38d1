"""The webhook port under abuse, on a real HTTPS server on loopback: connections that never
start TLS, a body nested too deep to read; and the pure parts (the per-client rate and the
fair slots). A client flooding it (seconds of load) is tests/security/test_webhook_flood.py.

Clients pick their source address in 127.0.0.0/8, so the server sees two peers."""

from __future__ import annotations

import asyncio
import logging
import ssl
from pathlib import Path

import pytest
from aiohttp import web
from tls_loopback import exchange

from ansible_operator.serving import pki
from ansible_operator.serving.http_limits import GuardedAppRunner, GuardedSite, ServerLimits
from ansible_operator.webhooks import tls
from ansible_operator.webhooks.admission_limits import FairSlots, PeerRate, SlotsBusy
from webhook_port import (
    API_SERVER,
    ATTACKER,
    client_context,
    review_body,
    serving_tls,
    session_from,
    webhook_server,
)


def review_with_object(object_json: str) -> bytes:
    return review_body().replace(b'{"metadata": {"name": "c"}}', object_json.encode())


def nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


@pytest.fixture(scope="module")
def serving(tmp_path_factory: pytest.TempPathFactory) -> tls.ServingTls:
    return serving_tls(tmp_path_factory.mktemp("webhook-tls"))


# ----- the TLS handshake ------------------------------------------------------------------


async def test_connections_that_never_start_tls_are_closed_and_never_lock_out_a_client(
    serving: tls.ServingTls,
) -> None:
    async def hello(_request: web.Request) -> web.Response:
        return web.Response(text="hello")

    app = web.Application()
    app.router.add_get("/", hello)
    runner = GuardedAppRunner(app, "webhook", ServerLimits(header_timeout=1.0, max_connections=8))
    await runner.setup()
    site = GuardedSite(runner, "127.0.0.1", 0, tls=serving.context)
    await site.start()
    try:
        port = site.bound[1]
        silent = [
            await asyncio.open_connection("127.0.0.1", port, local_addr=(ATTACKER, 0))
            for _ in range(40)
        ]
        # Counted from their accept: never more than the cap, whatever they do not send.
        assert runner.guard.open <= 8
        async with (
            session_from(API_SERVER, serving) as session,
            session.get(f"https://127.0.0.1:{port}/") as response,
        ):
            assert await response.text() == "hello"
        # Each silent connection is closed: evicted, or at the handshake timeout.
        for reader, writer in silent:
            assert await asyncio.wait_for(reader.read(), 30) == b""
            writer.close()
        assert runner.guard.counts["evicted"] >= 32
        assert runner.guard.counts["unfinished_handshakes"] >= 1
        assert runner.guard.open == 0
    finally:
        await runner.cleanup()


# ----- per-client fairness ----------------------------------------------------------------


async def test_past_its_rate_a_client_is_refused_before_its_body_is_read(
    serving: tls.ServingTls,
) -> None:
    rate = PeerRate(rate=0.01, burst=2)
    async with (
        webhook_server(serving, FairSlots(2), 0.0, rate=rate) as (_server, url),
        session_from(ATTACKER, serving) as attacker,
        session_from(API_SERVER, serving) as api_server,
    ):
        got = []
        for number in range(3):
            async with attacker.post(url, data=review_body(f"a-{number}")) as response:
                got.append((response.status, response.headers.get("Retry-After")))
        assert [status for status, _ in got] == [200, 200, 429]
        assert got[2][1] is not None and int(got[2][1]) >= 1
        async with api_server.post(url, data=review_body()) as response:
            assert response.status == 200  # another address, another bucket


def test_the_rate_refills_over_time() -> None:
    now = [0.0]
    rate = PeerRate(rate=2.0, burst=2, clock=lambda: now[0])
    assert [rate.retry_after("p") for _ in range(2)] == [None, None]
    assert rate.retry_after("p") == pytest.approx(0.5)
    now[0] = 0.5
    assert rate.retry_after("p") is None
    assert rate.retry_after("q") is None


async def test_a_freed_slot_goes_to_the_client_holding_fewest() -> None:
    slots = FairSlots(2)
    flood = [slots.reserve(ATTACKER) for _ in range(4)]
    real = slots.reserve(API_SERVER)
    assert [ticket.granted.done() for ticket in flood] == [True, True, False, False]
    flood[0].close()
    assert real.granted.done() and not flood[2].granted.done()
    real.close()
    assert flood[2].granted.done()


async def test_a_client_may_queue_only_as_many_requests_as_there_are_slots() -> None:
    slots = FairSlots(2, queue=3)
    for _ in range(4):
        slots.reserve(ATTACKER)
    with pytest.raises(SlotsBusy, match=f"2 admission requests of {ATTACKER} already wait"):
        slots.reserve(ATTACKER)
    slots.reserve(API_SERVER)  # the whole queue: 3
    with pytest.raises(SlotsBusy, match="3 admission requests already wait"):
        slots.reserve("127.0.0.3")


async def test_a_request_given_up_while_waiting_leaves_its_place() -> None:
    slots = FairSlots(1)
    holder = slots.reserve(API_SERVER)
    waiting = slots.reserve(ATTACKER)
    task = asyncio.create_task(waiting.__aenter__())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert slots.waiting == 0
    holder.close()
    assert slots.free == 1


# ----- bodies nested too deep -------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (nested(700), "expected kind AdmissionReview"),
        (review_with_object(nested(20_000)), "nests too deep"),
    ],
    ids=["700 levels", "20000 levels in the object"],
)
async def test_a_deeply_nested_body_is_a_400_the_log_explains_without_a_traceback(
    serving: tls.ServingTls, caplog: pytest.LogCaptureFixture, body: str | bytes, problem: str
) -> None:
    caplog.set_level(logging.DEBUG)
    async with (
        webhook_server(serving, FairSlots(2), 0.0) as (_server, url),
        session_from(API_SERVER, serving) as session,
        session.post(url, data=body) as response,
    ):
        assert response.status == 400
        # The caller may be anyone: the body says no more than that.
        assert await response.text() == "not an AdmissionReview this webhook can read\n"
    assert problem in caplog.text  # the operator's log says what was wrong
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


async def test_with_client_certificates_a_client_is_its_certificate_not_its_address(
    tmp_path: Path,
) -> None:
    serving = await tls.operator_made(None, None, [API_SERVER, "localhost"], tmp_path / "tls")
    client_ca = pki.create_ca(tmp_path / "client-ca", "api-server-client-ca")
    tls.require_client_certificates(serving.context, client_ca.cert_path)
    api_server = pki.issue_client_cert(client_ca, tmp_path / "client-ca", "kube-apiserver")
    flooder = pki.issue_client_cert(client_ca, tmp_path / "client-ca", "flooder")
    rate = PeerRate(rate=0.01, burst=2)
    async with (
        webhook_server(serving, FairSlots(2), 0.0, rate=rate) as (_server, url),
        # Both from one address, as a Pod beside the API server's egress might be.
        session_from(API_SERVER, serving, cert=flooder) as flooding,
        session_from(API_SERVER, serving, cert=api_server) as calling,
    ):
        statuses = []
        for number in range(3):
            async with flooding.post(url, data=review_body(f"f-{number}")) as response:
                statuses.append(response.status)
        async with calling.post(url, data=review_body("real")) as response:
            answered = response.status
    assert statuses == [200, 200, 429]
    assert answered == 200  # its own share: the flood from its address did not take it


def test_the_tls_handshake_requires_a_client_certificate_of_the_given_ca(
    serving: tls.ServingTls, tmp_path: Path
) -> None:
    client_ca = pki.create_ca(tmp_path / "client-ca", "api-server-client-ca")
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(serving.cert, serving.key)
    tls.require_client_certificates(server, client_ca.cert_path)
    anonymous = client_context(serving)
    try:
        refused = exchange(anonymous, server, API_SERVER).startswith("server: ")
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
        refused = True  # the server's refusal can reach the client before its byte goes
    assert refused
    signed = pki.issue_client_cert(client_ca, tmp_path / "client-ca", "apiserver")
    known = client_context(serving)
    known.load_cert_chain(signed.cert_path, signed.key_path)
    assert exchange(known, server, API_SERVER) == "apiserver"


def test_a_client_ca_that_does_not_load_stops_start_up_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nope.crt"
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    with pytest.raises(SystemExit, match=f"--webhook-client-ca: cannot load {missing}"):
        tls.require_client_certificates(context, missing)
