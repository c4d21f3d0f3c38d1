"""Exec credential plugins (a process each run): their token is sent, and they
are re-run before expiry and after a 401, not on every request."""

from __future__ import annotations

import datetime
import sys
from pathlib import Path
from typing import Any

import pytest

from ansible_operator.kube import credentials
from ansible_operator.kube.config import KubeConfigError, load_config
from kubeconfig_files import UTC, Clock, write_kubeconfig

PLUGIN = """\
import json, pathlib
here = pathlib.Path(__file__).parent
with open(here / "runs.log", "a") as runs:
    runs.write("run\\n")
status = {"token": (here / "token.txt").read_text().strip()}
expiry = here / "expiry.txt"
if expiry.exists():
    status["expirationTimestamp"] = expiry.read_text().strip()
print(json.dumps({
    "apiVersion": "client.authentication.k8s.io/v1",
    "kind": "ExecCredential",
    "status": status,
}))
"""


def write_plugin(directory: Path, token: str, expiry: datetime.datetime | None) -> Path:
    plugin = directory / "plugin.py"
    plugin.write_text(PLUGIN)
    (directory / "token.txt").write_text(token)
    if expiry is not None:
        (directory / "expiry.txt").write_text(expiry.strftime("%Y-%m-%dT%H:%M:%SZ"))
    return plugin


def plugin_runs(directory: Path) -> int:
    return len((directory / "runs.log").read_text().splitlines())


def exec_user(plugin: Path) -> dict[str, Any]:
    return {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": sys.executable,
            "args": [str(plugin)],
            "interactiveMode": "Never",
        }
    }


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(credentials, "now", fake)
    return fake


async def test_exec_plugin_token_is_sent(tmp_path: Path) -> None:
    plugin = write_plugin(tmp_path, "exec-token", datetime.datetime.now(tz=UTC).replace(year=2099))
    config = load_config(write_kubeconfig(tmp_path, exec_user(plugin)))
    assert await config.auth_headers() == {"Authorization": "Bearer exec-token"}


async def test_exec_plugin_is_rerun_five_minutes_before_expiry_and_not_before(
    tmp_path: Path, clock: Clock
) -> None:
    expiry = (datetime.datetime.now(tz=UTC) + datetime.timedelta(hours=1)).replace(microsecond=0)
    plugin = write_plugin(tmp_path, "token-1", expiry)
    config = load_config(write_kubeconfig(tmp_path, exec_user(plugin)))
    assert plugin_runs(tmp_path) == 1
    (tmp_path / "token.txt").write_text("token-2")

    for _ in range(3):
        assert await config.auth_headers() == {"Authorization": "Bearer token-1"}
    clock.offset = datetime.timedelta(minutes=54)  # six minutes left
    assert await config.auth_headers() == {"Authorization": "Bearer token-1"}
    assert plugin_runs(tmp_path) == 1

    clock.offset = datetime.timedelta(minutes=56)  # four minutes left: renew
    assert await config.auth_headers() == {"Authorization": "Bearer token-2"}
    assert await config.auth_headers() == {"Authorization": "Bearer token-2"}
    assert plugin_runs(tmp_path) == 2


async def test_exec_plugin_without_expiry_is_rerun_only_after_a_401(tmp_path: Path) -> None:
    plugin = write_plugin(tmp_path, "revoked", None)
    config = load_config(write_kubeconfig(tmp_path, exec_user(plugin)))
    rejected = await config.auth_headers()
    assert await config.auth_headers() == rejected
    assert plugin_runs(tmp_path) == 1

    (tmp_path / "token.txt").write_text("reissued")
    assert await config.refresh_credentials(rejected) is True
    assert await config.auth_headers() == {"Authorization": "Bearer reissued"}
    assert plugin_runs(tmp_path) == 2
    # Another request rejected with the old token meanwhile: already renewed.
    assert await config.refresh_credentials(rejected) is True
    assert plugin_runs(tmp_path) == 2


async def test_exec_plugin_rerun_that_gives_the_same_token_asks_for_no_retry(
    tmp_path: Path,
) -> None:
    plugin = write_plugin(tmp_path, "same", None)
    config = load_config(write_kubeconfig(tmp_path, exec_user(plugin)))
    assert await config.refresh_credentials(await config.auth_headers()) is False
    assert plugin_runs(tmp_path) == 2


async def test_exec_plugin_token_issued_for_a_short_time_is_not_renewed_on_every_request(
    tmp_path: Path,
) -> None:
    expiry = datetime.datetime.now(tz=UTC) + datetime.timedelta(minutes=2)
    plugin = write_plugin(tmp_path, "short-lived", expiry)
    config = load_config(write_kubeconfig(tmp_path, exec_user(plugin)))
    for _ in range(3):
        assert await config.auth_headers() == {"Authorization": "Bearer short-lived"}
    assert plugin_runs(tmp_path) == 1


def test_failing_exec_plugin_is_an_error_naming_kubeconfig_user_and_output(
    tmp_path: Path,
) -> None:
    plugin = tmp_path / "plugin.py"
    plugin.write_text("import sys\nsys.exit('no credentials for profile prod')\n")
    path = write_kubeconfig(tmp_path, exec_user(plugin))
    with pytest.raises(KubeConfigError) as error:
        load_config(path)
    message = str(error.value)
    assert str(path) in message
    assert "'operator'" in message
    assert "no credentials for profile prod" in message
