"""A run's grant, event channel, slot and credential go with the run, however it ends.

RunnerHost.run is the one way through the runner for reconciles and admission
runs; the process itself is faked here (the integration tests run it for real).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from ansible_operator.kube.types import Owner
from ansible_operator.observability.metrics import Metrics
from ansible_operator.runner import host as host_module
from ansible_operator.runner.access import RunAccess
from ansible_operator.runner.event_plugin import TOKEN_ENV
from ansible_operator.runner.events import RunSummary
from ansible_operator.runner.host import RunnerHost
from ansible_operator.runner.plan import RunPlan, new_ident
from ansible_operator.runner.process import RunSpec
from ansible_operator.runner.receiver import EventReceiver, RunChannel
from ansible_operator.settings import RunSettings, Settings

OWNER = Owner(group="", version="v1", kind="ConfigMap", namespace="ns", name="cm", uid="")
TOKEN = "proxy-token-of-the-run"


class Grants:
    """A proxy that records what it granted and what was revoked."""

    def __init__(self) -> None:
        self.granted: list[tuple[Owner, bool, bool]] = []
        self.revoked = 0

    def grant(
        self, owner: Owner, *, writes: bool = True, owns: bool = True, dry_run: bool = False
    ) -> RunAccess:
        self.granted.append((owner, writes, owns))
        kubeconfig = {"users": [{"name": "run", "user": {"token": TOKEN}}]}

        def revoke() -> None:
            self.revoked += 1

        return RunAccess(kubeconfig=kubeconfig, revoke=revoke)


async def post_event(receiver: EventReceiver, token: str, event: dict[str, Any]) -> int:
    connector = aiohttp.UnixConnector(path=str(receiver.socket_path))
    async with (
        aiohttp.ClientSession(connector=connector) as session,
        session.post(
            "http://localhost/events",
            data=json.dumps(event),
            headers={"Authorization": f"Bearer {token}"},
        ) as response,
    ):
        return response.status


LABEL = "core/v1/ConfigMap"


def plan_in(root: Path, *, ansible_args: str = "", writes: bool = True) -> RunPlan:
    return RunPlan(
        ident=new_ident(),
        owner=OWNER,
        described="kind=ConfigMap namespace=ns name=cm",
        subject=Path("core", "v1", "ConfigMap", "ns", "cm"),
        role=root / "roles" / "cm",
        playbook=None,
        extravars={"x": 1},
        verbosity=0,
        timeout=None,
        keep_artifacts=0,
        skip_facts=True,
        ansible_args=ansible_args,
        writes=writes,
        label=LABEL,
    )


@pytest.fixture
async def host(tmp_path: Path) -> AsyncIterator[RunnerHost]:
    """A host in reference mode, without cgroups, granting through `Grants`."""
    host = RunnerHost(
        settings=Settings(runs=RunSettings(runner_mode="reference")),
        access=Grants(),
        runner_root=tmp_path / "runs",
        scratch=tmp_path,
        metrics=Metrics(),
        max_runs=1,
        contain=False,
    )
    await host.start()
    yield host
    await host.stop()


def in_flight(host: RunnerHost) -> float | None:
    return host.metrics.registry.get_sample_value("ansible_operator_runs_in_flight", {"GVK": LABEL})


async def test_a_cancelled_run_loses_its_grant_channel_slot_and_credential_and_is_rotated(
    tmp_path: Path, host: RunnerHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    running = asyncio.Event()
    specs: list[RunSpec] = []
    summaries: list[RunSummary] = []
    seen: list[dict[str, Any]] = []

    async def never_ends(spec: RunSpec, summary: RunSummary, **_: Any) -> Any:
        specs.append(spec)
        summaries.append(summary)
        (spec.run_dir.artifacts / spec.ident).mkdir(parents=True)
        running.set()
        await asyncio.Event().wait()

    monkeypatch.setattr(host_module, "execute", never_ends)
    grants = host.access
    assert isinstance(grants, Grants)
    plan = plan_in(tmp_path / "runs", writes=False)
    run = asyncio.ensure_future(host.run(plan, on_event=seen.append))
    await asyncio.wait_for(running.wait(), 10)
    spec = specs[0]
    token = spec.env[TOKEN_ENV]
    assert spec.ident == plan.ident  # the caller named the run
    assert grants.granted == [(OWNER, False, True)]
    assert spec.run_dir.kubeconfig.exists()
    assert spec.run_dir.artifacts == tmp_path / "runs" / plan.subject / "artifacts"
    assert in_flight(host) == 1  # a capped run holds a slot while it runs
    assert await post_event(host.receiver, token, {"event": "playbook_on_start"}) == 204
    assert seen == [{"event": "playbook_on_start"}]
    assert TOKEN not in summaries[0].redactor.text(f"token {TOKEN}")

    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run

    assert in_flight(host) == 0
    assert grants.revoked == 1
    assert await post_event(host.receiver, token, {"event": "late"}) == 401
    assert not spec.run_dir.path.exists()
    # It kept no artifacts (keep_artifacts=0): rotated away once it ended.
    assert not (spec.run_dir.artifacts / spec.ident).exists()


async def test_a_run_whose_directory_cannot_be_written_gives_back_its_grant(
    tmp_path: Path, host: RunnerHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    grants = host.access
    assert isinstance(grants, Grants)
    receiver = host.receiver
    opened: list[RunChannel] = []
    open_channel = receiver.open_channel

    def recorded(*args: Any, **kwargs: Any) -> RunChannel:
        opened.append(open_channel(*args, **kwargs))
        return opened[-1]

    monkeypatch.setattr(receiver, "open_channel", recorded)

    async def never_called(*_: Any, **__: Any) -> Any:
        raise AssertionError("a run without a directory never starts")

    monkeypatch.setattr(host_module, "execute", never_called)
    with pytest.raises(ValueError, match="quotation"):
        await host.run(plan_in(tmp_path / "runs", ansible_args="--tags 'unclosed"))
    assert grants.granted == [(OWNER, True, True)]
    assert grants.revoked == 1
    assert in_flight(host) is None  # it never waited for a slot
    assert await post_event(receiver, opened[0].token, {"event": "late"}) == 401
