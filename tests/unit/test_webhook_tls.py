"""The webhook server's certificate: from cert-manager style files, followed when they are
renewed; or issued from a CA the replicas share through a Secret."""

from __future__ import annotations

import asyncio
import base64
import ssl
from pathlib import Path
from typing import Any

import pytest

from ansible_operator.serving import pki
from ansible_operator.testing.fake_api import FakeApi
from ansible_operator.webhooks import tls


def issued(directory: Path, ca_name: str) -> tuple[pki.KeyPair, pki.KeyPair]:
    ca = pki.create_ca(directory / ca_name, ca_name)
    return ca, pki.issue_server_cert(ca, directory / ca_name, "tls", ["127.0.0.1"], "127.0.0.1")


def mount(directory: Path, ca: pki.KeyPair, serving: pki.KeyPair) -> None:
    """As the kubelet updates a mounted Secret: the files replaced."""
    directory.mkdir(exist_ok=True)
    (directory / "tls.crt").write_bytes(serving.cert_pem())
    (directory / "tls.key").write_bytes(serving.key_pem())
    (directory / "ca.crt").write_bytes(ca.cert_pem())


async def trusted_by(server: asyncio.Server, ca: pki.KeyPair) -> bool:
    port = server.sockets[0].getsockname()[1]
    client = ssl.create_default_context(cadata=ca.cert_pem().decode())
    try:
        _, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=client, server_hostname="127.0.0.1"
        )
    except ssl.SSLError:
        return False
    writer.close()
    return True


def test_files_are_followed_when_cert_manager_renews_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tls, "RELOAD_EVERY", 0.05)
    first_ca, first = issued(tmp_path, "first")
    second_ca, second = issued(tmp_path, "second")
    mounted = tmp_path / "mounted"
    mount(mounted, first_ca, first)
    serving = tls.from_files(mounted)
    assert serving.ca_bundle == first_ca.cert_pem() and serving.watched

    async def scenario() -> None:
        async def close(_reader: Any, writer: asyncio.StreamWriter) -> None:
            writer.close()

        server = await asyncio.start_server(close, "127.0.0.1", 0, ssl=serving.context)
        follower = asyncio.create_task(serving.follow_renewals())
        try:
            assert await trusted_by(server, first_ca)
            assert not await trusted_by(server, second_ca)
            mount(mounted, second_ca, second)
            for _ in range(100):
                if await trusted_by(server, second_ca):
                    break
                await asyncio.sleep(0.05)
            assert await trusted_by(server, second_ca)
        finally:
            follower.cancel()
            server.close()

    asyncio.run(scenario())


def test_files_that_do_not_load_stop_start_up_naming_them(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"--webhook-cert-dir: cannot load .*tls\.crt"):
        tls.from_files(tmp_path)


def stored_ca(secrets: FakeApi) -> dict[str, Any] | None:
    return secrets.held(tls.SECRETS, "ca", "ops")


def test_the_ca_is_made_once_and_kept_in_the_secret(tmp_path: Path) -> None:
    secrets = FakeApi()
    made = asyncio.run(tls.operator_made(secrets, ("ops", "ca"), ["svc.ops.svc"], tmp_path / "a"))
    again = asyncio.run(tls.operator_made(secrets, ("ops", "ca"), ["svc.ops.svc"], tmp_path / "b"))
    assert made.ca_bundle == again.ca_bundle
    assert len(secrets.writes) == 1
    stored = stored_ca(secrets)
    assert stored is not None
    assert base64.b64decode(stored["data"]["ca.crt"]) == made.ca_bundle
    assert (tmp_path / "a" / "ca.key").stat().st_mode & 0o777 == 0o600


def test_a_replica_that_loses_the_race_uses_the_winners_ca(tmp_path: Path) -> None:
    theirs = tls.new_ca()
    secrets = FakeApi()
    # Another replica writes its CA between our read and our create.
    secrets.before(
        "create",
        lambda resource, _body: (
            stored_ca(secrets) or secrets.put(resource, tls.ca_secret("ops", "ca", theirs))
        ),
    )
    made = asyncio.run(tls.operator_made(secrets, ("ops", "ca"), ["svc.ops.svc"], tmp_path))
    assert made.ca_bundle == theirs[0]


def test_a_ca_near_its_end_is_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old = tls.new_ca()
    assert tls.usable_ca(*old)
    assert not tls.usable_ca(old[0], b"not a key")
    secrets = FakeApi()
    secrets.put(tls.SECRETS, tls.ca_secret("ops", "ca", old))
    monkeypatch.setattr(tls, "RENEW_BEFORE", tls.RENEW_BEFORE * 100)  # a year is "near" now
    assert not tls.usable_ca(*old)
    near = tls.Lifetimes(ca=tls.RENEW_BEFORE * 200, ca_renew_before=tls.RENEW_BEFORE * 100)
    made = asyncio.run(tls.operator_made(secrets, ("ops", "ca"), ["svc.ops.svc"], tmp_path, near))
    assert made.ca_bundle != old[0]
    assert len(secrets.writes) == 1
