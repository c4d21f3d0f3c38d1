"""User metrics from osdk_metric payloads."""

from __future__ import annotations

import pytest

from ansible_operator.metrics import Metrics


def test_user_counter_gauge_and_histogram_are_exposed() -> None:
    metrics = Metrics()
    metrics.user_metric({"name": "my_counter", "type": "counter", "operation": "increment"})
    metrics.user_metric({"name": "my_counter", "type": "counter", "operation": "add", "value": 2})
    metrics.user_metric({"name": "my_gauge", "type": "gauge", "operation": "set", "value": 7})
    metrics.user_metric(
        {"name": "my_hist", "type": "histogram", "operation": "observe", "value": 0.3}
    )
    text = metrics.exposition().decode()
    assert "my_counter_total 3.0" in text
    assert "my_gauge 7.0" in text
    assert "my_hist_count 1.0" in text
    assert 'ansible_operator_build_info{version="' in text


@pytest.mark.parametrize(
    "payload",
    [
        {"type": "counter", "operation": "increment"},
        {"name": "x", "type": "meter", "operation": "increment"},
        {"name": "x", "type": "counter", "operation": "set"},
    ],
)
def test_bad_payloads_are_refused_with_a_reason(payload: dict) -> None:
    with pytest.raises(ValueError):
        Metrics().user_metric(payload)


def test_a_metric_keeps_its_type() -> None:
    metrics = Metrics()
    metrics.user_metric({"name": "m", "type": "gauge", "operation": "set", "value": 1})
    with pytest.raises(ValueError, match="is a gauge"):
        metrics.user_metric({"name": "m", "type": "counter", "operation": "increment"})


async def test_requests_of_a_session_are_counted_by_source_and_method() -> None:
    from aiohttp import ClientSession, web

    async def ok(_request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_route("*", "/", ok)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    metrics = Metrics()
    try:
        async with ClientSession(trace_configs=[metrics.request_counter("proxy")]) as session:
            for method in ("GET", "GET", "POST"):
                async with session.request(method, f"http://127.0.0.1:{port}/") as response:
                    await response.read()
    finally:
        await runner.cleanup()
    text = metrics.exposition().decode()
    assert 'ansible_operator_api_requests_total{method="GET",source="proxy"} 2.0' in text
    assert 'ansible_operator_api_requests_total{method="POST",source="proxy"} 1.0' in text
