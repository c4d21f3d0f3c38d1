"""A kubeconfig rewritten while the operator runs is read again; requests in
flight finish on the session they started on, new ones go to the new server."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from ansible_operator.kube import config as config_module
from ansible_operator.kube.config import KubeConfig, load_config
from ansible_operator.kube.kubeconfig import build_kubeconfig, write_kubeconfig
from ansible_operator.kube.upstreams import Upstreams


@pytest.fixture(autouse=True)
def look_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config_module, "RECHECK_INTERVAL", 0.0)


def write(path: Path, server: str) -> Path:
    return write_kubeconfig(path, build_kubeconfig(server, namespace="team"))


async def test_a_new_server_in_the_file_is_taken(tmp_path: Path) -> None:
    # Same size, written within a timestamp tick: only the content tells.
    path = write(tmp_path / "kubeconfig", "http://127.0.0.1:1111")
    config = load_config(path)
    assert not await config.reload_if_changed()
    write(path, "http://127.0.0.1:2222")
    assert await config.reload_if_changed()
    assert (config.server, config.generation, config.namespace) == (
        "http://127.0.0.1:2222",
        1,
        "team",
    )


async def test_the_same_bytes_written_again_change_nothing(tmp_path: Path) -> None:
    path = write(tmp_path / "kubeconfig", "http://127.0.0.1:1111")
    config = load_config(path)
    write(path, "http://127.0.0.1:1111")
    assert not await config.reload_if_changed()
    assert config.generation == 0


async def test_a_broken_file_keeps_the_server_until_it_is_fixed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write(tmp_path / "kubeconfig", "http://127.0.0.1:1111")
    config = load_config(path)
    path.write_text("")  # what a reader may see mid-write
    assert not await config.reload_if_changed()
    assert config.server == "http://127.0.0.1:1111"
    assert f"cannot use kubeconfig {path}" in caplog.text
    write(path, "http://127.0.0.1:3333")
    assert await config.reload_if_changed()
    assert config.server == "http://127.0.0.1:3333"


async def test_a_request_in_flight_keeps_its_session_and_new_ones_switch(tmp_path: Path) -> None:
    path = write(tmp_path / "kubeconfig", "http://127.0.0.1:1111")
    config: KubeConfig = load_config(path)
    upstreams = Upstreams(config, lambda _config: aiohttp.ClientSession())
    async with upstreams.use() as in_flight:
        write(path, "http://127.0.0.1:2222")
        switched = await upstreams.current()
        assert switched.server == "http://127.0.0.1:2222"
        assert not in_flight.session.closed, "closed under a request still using it"
    assert in_flight.session.closed, "the replaced session outlived its last request"
    assert not switched.session.closed
    await upstreams.close()
