"""A client flooding the webhook port, on a real HTTPS server on loopback, while
another (the API server) must still be answered: its 429s come quickly instead
of queueing behind the real requests. Seconds of load, so not a unit test; the
rest of the port's limits are tests/unit/test_webhook_limits.py.

Clients pick their source address in 127.0.0.0/8, so the server sees two peers."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from ansible_operator.webhooks import tls
from ansible_operator.webhooks.admission_limits import FairSlots
from webhook_port import (
    API_SERVER,
    ATTACKER,
    review_body,
    serving_tls,
    session_from,
    webhook_server,
)


@pytest.fixture(scope="module")
def serving(tmp_path_factory: pytest.TempPathFactory) -> tls.ServingTls:
    return serving_tls(tmp_path_factory.mktemp("webhook-tls"))


async def test_a_flooding_client_gets_429s_while_the_api_server_is_still_answered(
    serving: tls.ServingTls,
) -> None:
    slots = FairSlots(2)
    async with webhook_server(serving, slots, run_seconds=0.3) as (server, url):
        statuses: list[int] = []
        answered = asyncio.Event()

        async def flood(session: aiohttp.ClientSession) -> None:
            number = 0
            # Until the API server's requests are answered: each attacker's last request
            # ends normally, so that what the server counted is what the clients saw.
            while not answered.is_set():
                number += 1
                async with session.post(url, data=review_body(f"a-{number}")) as response:
                    statuses.append(response.status)

        async with (
            session_from(ATTACKER, serving) as attacker,
            # The API server gives a webhook 10s (timeoutSeconds), then applies the policy.
            session_from(API_SERVER, serving, timeout=10.0) as api_server,
        ):
            flooding = [asyncio.create_task(flood(attacker)) for _ in range(24)]
            await asyncio.sleep(0)
            answers = []
            for number in range(6):
                async with api_server.post(url, data=review_body(f"real-{number}")) as response:
                    assert response.status == 200, await response.text()
                    answers.append((await response.json())["response"])
            answered.set()
            await asyncio.gather(*flooding)
        assert [answer["uid"] for answer in answers] == [f"real-{n}" for n in range(6)]
        assert all(answer["allowed"] for answer in answers)
        # The flood was turned away quickly rather than queued behind the real requests.
        assert statuses.count(429) > 0
        assert server.throttled == statuses.count(429)
