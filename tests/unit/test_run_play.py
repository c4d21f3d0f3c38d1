"""A run's grant, event channel and credential go with the run, however it ends.

AnsiblePlayer.play is the one way through the runner for reconciles and admission
runs; the process itself is faked here (the integration tests run it for real).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from ansible_operator.kube.types import Owner
from ansible_operator.runner import play as play_module
from ansible_operator.runner.access import RunAccess
from ansible_operator.runner.event_plugin import TOKEN_ENV
from ansible_operator.runner.events import RunSummary
from ansible_operator.runner.play import AnsiblePlayer, RunPlan
from ansible_operator.runner.process import RunSpec
from ansible_operator.runner.receiver import EventReceiver, RunChannel
from ansible_operator.runner.rundir import RunDir
from ansible_operator.settings import Settings

OWNER = Owner(group="", version="v1", kind="ConfigMap", namespace="ns", name="cm", uid="")
TOKEN = "proxy-token-of-the-run"


class Grants:
    """A proxy that records what it granted and what was revoked."""

    def __init__(self) -> None:
        self.granted: list[tuple[Owner, bool]] = []
        self.revoked = 0

    def grant(self, owner: Owner, *, writes: bool = True) -> RunAccess:
        self.granted.append((owner, writes))
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


def plan_in(root: Path, *, ansible_args: str = "", writes: bool = True) -> RunPlan:
    return RunPlan(
        owner=OWNER,
        described="kind=ConfigMap namespace=ns name=cm",
        subject_dir=root / "core" / "v1" / "ConfigMap" / "ns" / "cm",
        role=root / "roles" / "cm",
        playbook=None,
        extravars={"x": 1},
        verbosity=0,
        timeout=None,
        keep_artifacts=0,
        skip_facts=True,
        ansible_args=ansible_args,
        writes=writes,
    )


def player_for(root: Path, receiver: EventReceiver, grants: Grants) -> AnsiblePlayer:
    return AnsiblePlayer(
        options=Settings(),
        receiver=receiver,
        access=grants,
        runner_root=root,
        warm=lambda: None,
        run_groups=lambda: None,
    )


async def test_a_cancelled_run_loses_its_grant_channel_and_credential_and_is_rotated(
    tmp_path: Path, receiver: EventReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    running = asyncio.Event()
    specs: list[RunSpec] = []
    rotated: list[RunDir] = []
    seen: list[dict[str, Any]] = []
    held: list[str] = []

    async def never_ends(spec: RunSpec, summary: RunSummary, **_: Any) -> Any:
        specs.append(spec)
        running.set()
        await asyncio.Event().wait()

    @contextlib.asynccontextmanager
    async def hold(spec: RunSpec) -> AsyncIterator[None]:
        held.append(f"in {spec.ident}")
        try:
            yield
        finally:
            held.append(f"out {spec.ident}")

    monkeypatch.setattr(play_module, "execute", never_ends)
    grants = Grants()
    summary = RunSummary()
    player = player_for(tmp_path / "runs", receiver, grants)
    run = asyncio.ensure_future(
        player.play(
            plan_in(tmp_path / "runs", writes=False),
            summary,
            hold=hold,
            on_event=seen.append,
            rotate=rotated.append,
        )
    )
    await asyncio.wait_for(running.wait(), 10)
    spec = specs[0]
    token = spec.env[TOKEN_ENV]
    assert grants.granted == [(OWNER, False)]
    assert spec.run_dir.kubeconfig.exists()
    assert await post_event(receiver, token, {"event": "playbook_on_start"}) == 204
    assert seen == [{"event": "playbook_on_start"}]
    assert TOKEN not in summary.redactor.text(f"token {TOKEN}")

    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run

    assert held == [f"in {spec.ident}", f"out {spec.ident}"]
    assert grants.revoked == 1
    assert await post_event(receiver, token, {"event": "late"}) == 401
    assert not spec.run_dir.path.exists()
    assert rotated == [spec.run_dir]


async def test_a_run_whose_directory_cannot_be_written_gives_back_its_grant(
    tmp_path: Path, receiver: EventReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    grants = Grants()
    opened: list[RunChannel] = []
    open_channel = receiver.open_channel

    def recorded(*args: Any, **kwargs: Any) -> RunChannel:
        opened.append(open_channel(*args, **kwargs))
        return opened[-1]

    monkeypatch.setattr(receiver, "open_channel", recorded)

    @contextlib.asynccontextmanager
    async def hold(spec: RunSpec) -> AsyncIterator[None]:
        raise AssertionError("a run without a directory never waits for a slot")
        yield

    player = player_for(tmp_path / "runs", receiver, grants)
    with pytest.raises(ValueError, match="quotation"):
        await player.play(
            plan_in(tmp_path / "runs", ansible_args="--tags 'unclosed"), RunSummary(), hold=hold
        )
    assert grants.granted == [(OWNER, True)]
    assert grants.revoked == 1
    assert await post_event(receiver, opened[0].token, {"event": "late"}) == 401
