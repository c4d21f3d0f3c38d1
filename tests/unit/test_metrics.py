"""User metrics from osdk_metric payloads."""

from __future__ import annotations

import pytest

from ansible_operator.observability.metrics import Metrics

USER_NAMES = ("jobs", "runs", "level", "took", "waited")


def name_of(line: str) -> str:
    """The metric a line of the exposition is about."""
    return line.split()[2] if line.startswith("#") else line.split("{")[0].split()[0]


def exposed(metrics: Metrics) -> list[str]:
    return metrics.exposition().decode().splitlines()


def counter(name: str, **operations: object) -> dict:
    return {"name": name, "description": f"{name} help", "counter": operations}


def gauge(name: str, **operations: object) -> dict:
    return {"name": name, "description": f"{name} help", "gauge": operations}


def test_user_metrics_are_exposed_under_exactly_their_names() -> None:
    metrics = Metrics()
    metrics.user_metric(counter("jobs_total", increment=True))
    metrics.user_metric(counter("jobs_total", add=2))
    metrics.user_metric(counter("runs", increment=None, add=None))
    metrics.user_metric(gauge("level", set=7))
    metrics.user_metric({"name": "took", "description": "Took", "histogram": {"observe": 0.3}})
    metrics.user_metric({"name": "waited", "description": "Waited", "summary": {"observe": 2}})
    lines = exposed(metrics)
    assert [line for line in lines if line.startswith("# ") and "jobs_total" in line] == [
        "# HELP jobs_total jobs_total help",
        "# TYPE jobs_total counter",
    ]
    assert "jobs_total 3.0" in lines
    assert "runs 0.0" in lines
    assert "level 7.0" in lines
    assert 'took_bucket{le="0.25"} 0.0' in lines
    assert 'took_bucket{le="0.5"} 1.0' in lines
    assert "took_count 1.0" in lines
    assert "# TYPE waited summary" in lines
    assert "waited_sum 2.0" in lines
    assert "waited_count 1.0" in lines
    users = [line for line in lines if name_of(line).startswith(USER_NAMES)]
    assert not [line for line in users if "_created" in line or "runs_total" in line]
    assert not [line for line in users if 'le="0.075"' in line or 'le="0.75"' in line]
    assert 'ansible_operator_build_info{version="' in metrics.exposition().decode()


@pytest.mark.parametrize(
    ("operations", "value"),
    [
        ({}, 0.0),
        ({"increment": True, "add": 5}, 1.0),
        ({"increment": False, "add": 2.5}, 2.5),
        ({"add": 0}, 0.0),
    ],
)
def test_counter_operations_follow_go(operations: dict, value: float) -> None:
    metrics = Metrics()
    metrics.user_metric(counter("c_total", **operations))
    assert f"c_total {value}" in exposed(metrics)


@pytest.mark.parametrize(
    ("operations", "value"),
    [
        ({}, 10.0),
        ({"increment": True, "decrement": True}, 11.0),
        ({"decrement": True, "add": 5}, 9.0),
        ({"add": 0, "subtract": 3, "set": 1}, 7.0),
        ({"add": 0, "subtract": 0, "set": 4}, 4.0),
        ({"set": 0}, 10.0),  # Go cannot set a gauge to 0
    ],
)
def test_gauge_applies_the_first_operation_by_gos_precedence(
    operations: dict, value: float
) -> None:
    metrics = Metrics()
    metrics.user_metric(gauge("g", set=10))
    metrics.user_metric(gauge("g", **operations))
    assert f"g {value}" in exposed(metrics)


def test_gauge_set_to_current_time() -> None:
    metrics = Metrics()
    metrics.user_metric(gauge("now", set_to_current_time=True))
    [line] = [line for line in exposed(metrics) if line.startswith("now ")]
    assert float(line.split()[1]) > 1.7e9


def test_histogram_and_summary_observe_into_each_other_and_observe_zero_by_default() -> None:
    metrics = Metrics()
    metrics.user_metric({"name": "h", "description": "H", "histogram": {}})
    metrics.user_metric({"name": "h", "description": "H", "summary": {"observe": 4}})
    lines = exposed(metrics)
    assert 'h_bucket{le="0.005"} 1.0' in lines
    assert 'h_bucket{le="5"} 2.0' in lines
    assert "h_sum 4.0" in lines


@pytest.mark.parametrize(
    ("first", "then", "message"),
    [
        (counter("m"), gauge("m", set=1), "cannot change metric type of m, which is a counter"),
        (gauge("m"), counter("m"), "cannot change metric type of m, which is a gauge"),
        (
            {"name": "m", "description": "", "summary": {}},
            counter("m"),
            "cannot change metric type of m, which is a histogram or summary",
        ),
        (counter("m"), counter("m", add=-1), "counter metrics cannot decrease in value"),
        (
            counter("m"),
            {"name": "m", "counter": {}, "gauge": {}},
            "only one metric can be processed at a time",
        ),
        (counter("m"), {"name": "m", "description": "x"}, "a request should contain at least one"),
    ],
)
def test_refused_payloads_give_gos_reason(first: dict, then: dict, message: str) -> None:
    metrics = Metrics()
    metrics.user_metric(first)
    with pytest.raises(ValueError, match=message):
        metrics.user_metric(then)


def test_a_refused_operation_still_creates_the_metric() -> None:
    metrics = Metrics()
    with pytest.raises(ValueError, match="cannot decrease"):
        metrics.user_metric(counter("made_total", add=-1))
    assert "made_total 0.0" in exposed(metrics)


def test_a_name_taken_by_the_operator_is_accepted_but_not_exported(caplog) -> None:
    metrics = Metrics()
    before = exposed(metrics)
    with caplog.at_level("WARNING", logger="ansible_operator.observability.metrics"):
        metrics.user_metric(gauge("ansible_operator_queue_depth", set=99))
        metrics.user_metric(gauge("ansible_operator_queue_depth", increment=True))
    assert exposed(metrics) == before
    assert "user metric not exported metric=ansible_operator_queue_depth" in caplog.text


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
