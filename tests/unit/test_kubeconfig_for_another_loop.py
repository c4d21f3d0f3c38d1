"""The leader election thread's copy of the KubeConfig follows a rewritten
kubeconfig as the main loop's does: each copy sees the change."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ansible_operator.kube import config as config_module
from ansible_operator.kube.config import load_config
from ansible_operator.kube.kubeconfig import build_kubeconfig, write_kubeconfig


@pytest.fixture(autouse=True)
def look_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config_module, "RECHECK_INTERVAL", 0.0)


def write(path: Path, server: str) -> Path:
    return write_kubeconfig(path, build_kubeconfig(server, namespace="team"))


async def test_both_copies_take_a_new_server_each_on_its_own_loop(tmp_path: Path) -> None:
    path = write(tmp_path / "kubeconfig", "http://127.0.0.1:1111")
    main = load_config(path)
    other = main.for_another_loop()
    write(path, "http://127.0.0.1:2222")
    assert await main.reload_if_changed()
    # The other copy, on another thread's loop, still sees the change.
    assert await asyncio.to_thread(asyncio.run, other.reload_if_changed())
    assert main.server == other.server == "http://127.0.0.1:2222"
    assert main.generation == other.generation == 1
    assert main.credentials is not other.credentials  # each read its own
