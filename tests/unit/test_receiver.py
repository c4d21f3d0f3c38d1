"""The event receiver routes events by run token and refuses strangers."""

from __future__ import annotations

import json
from pathlib import Path

import aiohttp

from ansible_operator.runner.receiver import EventReceiver


async def post(socket: Path, path: str, body: object, token: str | None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    connector = aiohttp.UnixConnector(path=str(socket))
    async with (
        aiohttp.ClientSession(connector=connector) as session,
        session.post(f"http://localhost{path}", data=json.dumps(body), headers=headers) as response,
    ):
        return response.status


async def test_events_reach_their_run_and_other_tokens_are_refused(tmp_path: Path) -> None:
    metrics: list[dict] = []
    receiver = EventReceiver(tmp_path / "sock" / "events.sock", on_metric=metrics.append)
    await receiver.start()
    try:
        assert receiver.socket_path.stat().st_mode & 0o777 == 0o600
        assert receiver.socket_path.parent.stat().st_mode & 0o777 == 0o700
        first, second = [], []
        one = receiver.open_channel(first.append)
        two = receiver.open_channel(second.append)
        assert await post(receiver.socket_path, "/events", {"event": "a"}, one.token) == 204
        assert await post(receiver.socket_path, "/events", {"event": "b"}, two.token) == 204
        assert first == [{"event": "a"}] and second == [{"event": "b"}]

        assert await post(receiver.socket_path, "/events", {"event": "x"}, None) == 401
        assert await post(receiver.socket_path, "/events", {"event": "x"}, "forged") == 401
        receiver.close_channel(one)
        assert await post(receiver.socket_path, "/events", {"event": "late"}, one.token) == 401
        assert first == [{"event": "a"}]

        assert await post(receiver.socket_path, "/metrics", {"name": "m"}, two.token) == 200
        assert metrics == [{"name": "m"}]
        assert await post(receiver.socket_path, "/events", [1, 2], two.token) == 400
        assert await post(receiver.socket_path, "/events", "text", two.token) == 400
        assert second == [{"event": "b"}]
    finally:
        await receiver.stop()
    assert not receiver.socket_path.exists()


async def test_metrics_answer_as_the_go_operator_does(tmp_path: Path) -> None:
    """200 and no body; 400 and the reason with a newline, which osdk_metric
    reports as its msg."""

    def refuse_negative(payload: dict) -> None:
        if (payload.get("counter") or {}).get("add", 0) < 0:
            raise ValueError("counter metrics cannot decrease in value")

    receiver = EventReceiver(tmp_path / "events.sock", on_metric=refuse_negative)
    await receiver.start()
    token = receiver.open_channel(lambda _event: None).token
    connector = aiohttp.UnixConnector(path=str(receiver.socket_path))
    headers = {"Authorization": f"Bearer {token}"}
    try:
        async with aiohttp.ClientSession(connector=connector) as session:
            for body, status, text in [
                ({"name": "c", "counter": {"add": 1}}, 200, ""),
                (
                    {"name": "c", "counter": {"add": -1}},
                    400,
                    "counter metrics cannot decrease in value\n",
                ),
            ]:
                async with session.post(
                    "http://localhost/metrics", data=json.dumps(body), headers=headers
                ) as response:
                    assert (response.status, await response.text()) == (status, text)
    finally:
        await receiver.stop()


async def test_events_sent_together_reach_their_run_in_their_order(tmp_path: Path) -> None:
    receiver = EventReceiver(tmp_path / "events.sock")
    await receiver.start()
    try:
        events: list[dict] = []
        channel = receiver.open_channel(events.append)
        batch = [{"event": "verbose", "stdout": "one"}, {"event": "playbook_on_start"}]
        assert await post(receiver.socket_path, "/events", batch, channel.token) == 204
        assert events == batch
        assert channel.received == 2
    finally:
        await receiver.stop()
