"""The operator-made webhook certificate renewed while the operator runs: when the serving
certificate is issued again, what the caBundle holds while a CA is replaced, and a live
server that changes certificate without stopping."""

from __future__ import annotations

import asyncio
import base64
import datetime
import logging
import ssl
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from ansible_operator.project.webhook_entries import Webhook, WebhookRule
from ansible_operator.testing.fake_api import FakeApi
from ansible_operator.webhooks import configurations, tls
from ansible_operator.webhooks.configurations import Endpoint
from ansible_operator.webhooks.rotation import CertificateRotation, serving_renewal

MINUTE = datetime.timedelta(minutes=1)
LIFETIMES = tls.Lifetimes(
    ca=120 * MINUTE,
    ca_renew_before=30 * MINUTE,
    serving=60 * MINUTE,
    check_every=5 * MINUTE,
    settle=datetime.timedelta(seconds=10),
)


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def ca_ending_in(validity: datetime.timedelta) -> tls.CaSet:
    return tls.CaSet(*tls.new_ca(validity))


def certs_in(bundle: bytes) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(bundle)


def holding_ca(ca: tls.CaSet) -> FakeApi:
    """An API server holding the CA Secret ops/ca."""
    secrets = FakeApi()
    secrets.put(tls.SECRETS, tls.ca_secret("ops", "ca", (ca.cert_pem, ca.key_pem)))
    return secrets


def stored_ca(secrets: FakeApi) -> tls.CaSet:
    """The CA the Secret ops/ca holds now."""
    stored = secrets.held(tls.SECRETS, "ca", "ops")
    assert stored is not None
    data = {key: base64.b64decode(value) for key, value in stored["data"].items()}
    previous = ()
    if "previous-ca.crt" in data:
        previous = tuple(x509.load_pem_x509_certificates(data["previous-ca.crt"]))
    return tls.CaSet(
        data["ca.crt"],
        data["ca.key"],
        tuple(cert.public_bytes(tls.serialization.Encoding.PEM) for cert in previous),
    )


def test_serving_certificate_is_renewed_at_two_thirds_of_its_life() -> None:
    ca = ca_ending_in(LIFETIMES.ca)
    start = now()
    issued = tls.Issued(ca.cert_pem, start, start + 90 * MINUTE)
    assert serving_renewal(issued, ca, True, start + 59 * MINUTE, LIFETIMES) is None
    reason = serving_renewal(issued, ca, True, start + 60 * MINUTE, LIFETIMES)
    assert reason is not None and reason.startswith("it ends at ")


def test_serving_certificate_moves_to_a_new_ca_only_once_its_bundle_has_settled() -> None:
    old, new = ca_ending_in(LIFETIMES.ca), ca_ending_in(LIFETIMES.ca)
    start = now()
    issued = tls.Issued(old.cert_pem, start, start + 90 * MINUTE)
    assert serving_renewal(issued, new, False, start, LIFETIMES) is None
    assert serving_renewal(issued, new, True, start, LIFETIMES) == "the CA was renewed"


def test_the_bundle_holds_the_replaced_ca_until_it_ends() -> None:
    old = ca_ending_in(40 * MINUTE)
    renewed = tls.renewed(old, LIFETIMES, now())
    assert renewed.cert_pem != old.cert_pem
    holding = certs_in(renewed.bundle(now()))
    assert [c.public_bytes(tls.serialization.Encoding.PEM) for c in holding] == [
        renewed.cert_pem,
        old.cert_pem,
    ]
    after_its_end = now() + 41 * MINUTE
    assert renewed.bundle(after_its_end) == renewed.cert_pem


def test_a_ca_near_its_end_is_renewed_in_the_secret_and_the_old_one_kept_for_the_bundle() -> None:
    old = ca_ending_in(40 * MINUTE)
    secrets = holding_ca(old)
    store = tls.SecretCaStore(secrets, "ops", "ca")
    # At start, 40 minutes left is enough (renewed right after, with an overlap) ...
    kept, renewed_here = asyncio.run(
        tls.current_ca(store, LIFETIMES, now(), keep_for=LIFETIMES.ca_renew_before / 2)
    )
    assert kept.cert_pem == old.cert_pem and not renewed_here
    # ... and 29 minutes later it is within ca_renew_before.
    later = now() + 11 * MINUTE
    ca, renewed_here = asyncio.run(
        tls.current_ca(store, LIFETIMES, later, keep_for=LIFETIMES.ca_renew_before)
    )
    assert renewed_here and ca.cert_pem != old.cert_pem
    assert stored_ca(secrets) == tls.CaSet(ca.cert_pem, ca.key_pem, (old.cert_pem,))
    # Another replica looking now uses it, and renews nothing.
    again, renewed_there = asyncio.run(
        tls.current_ca(store, LIFETIMES, later, keep_for=LIFETIMES.ca_renew_before)
    )
    assert again.cert_pem == ca.cert_pem and not renewed_there


def test_replicas_renewing_at_once_end_with_the_first_ones_ca() -> None:
    old = ca_ending_in(20 * MINUTE)
    secrets = holding_ca(old)
    ours = tls.SecretCaStore(secrets, "ops", "ca")
    seen = asyncio.run(ours.read())
    theirs = tls.renewed(seen, LIFETIMES, now())
    # The other replica writes between our read and our write.
    assert asyncio.run(ours.write(theirs, seen))
    assert not asyncio.run(ours.write(tls.renewed(seen, LIFETIMES, now()), seen))
    ca, renewed_here = asyncio.run(
        tls.current_ca(ours, LIFETIMES, now(), keep_for=LIFETIMES.ca_renew_before)
    )
    assert ca.cert_pem == theirs.cert_pem and not renewed_here


async def trusted_by(port: int, ca_pem: bytes) -> bool:
    client = ssl.create_default_context(cadata=ca_pem.decode())
    try:
        _, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=client, server_hostname="127.0.0.1"
        )
    except ssl.SSLError:
        return False
    writer.close()
    return True


class Configurations:
    """The caBundle the configurations hold, as `apply_ca_bundle` keeps it."""

    def __init__(self) -> None:
        self.bundle: bytes | None = None
        self.writes: list[bytes] = []

    async def apply(self, bundle: bytes) -> bool:
        if bundle == self.bundle:
            return False
        self.bundle = bundle
        self.writes.append(bundle)
        return True


def test_a_live_server_moves_to_the_renewed_ca_after_the_bundle_holding_both(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "ansible_operator.webhooks")
    old = ca_ending_in(40 * MINUTE)
    secrets = holding_ca(old)
    names = ["127.0.0.1"]

    async def scenario() -> None:
        serving = await tls.operator_made(
            secrets,
            ("ops", "ca"),
            names,
            tmp_path / "tls",
            LIFETIMES,
        )
        configs = Configurations()
        configs.bundle = serving.ca_bundle  # as start-up applied it
        start = now()
        rotation = CertificateRotation(
            serving, names, tmp_path / "tls", LIFETIMES, configs.apply, bundle_applied_at=start
        )

        async def close(_reader: Any, writer: asyncio.StreamWriter) -> None:
            writer.close()

        server = await asyncio.start_server(close, "127.0.0.1", 0, ssl=serving.context)
        port = server.sockets[0].getsockname()[1]
        try:
            await rotation.step(start)
            assert configs.writes == []
            assert await trusted_by(port, old.cert_pem)

            # 29 minutes left: the CA is renewed, the bundle holds both, the server keeps
            # its certificate until the API server has had the bundle for `settle`.
            renewal = start + 11 * MINUTE
            await rotation.step(renewal)
            new = stored_ca(secrets)
            assert new.cert_pem != old.cert_pem
            assert configs.writes == [new.cert_pem + old.cert_pem]
            assert await trusted_by(port, old.cert_pem)
            assert not await trusted_by(port, new.cert_pem)
            assert rotation.next_step(renewal) == renewal + LIFETIMES.settle

            await rotation.step(renewal + LIFETIMES.settle)
            assert await trusted_by(port, new.cert_pem)  # the same server, a new certificate
            assert not await trusted_by(port, old.cert_pem)

            # Once the old CA ends, it leaves the bundle.
            await rotation.step(start + 41 * MINUTE)
            assert configs.writes[-1] == new.cert_pem
        finally:
            server.close()

    asyncio.run(scenario())
    messages = [record.getMessage() for record in caplog.records]
    assert any(
        m.startswith("webhook CA renewed in Secret ops/ca until=") and "kept_in_bundle=1" in m
        for m in messages
    )
    assert any(
        m.startswith("webhook serving certificate renewed until=")
        and "because='the CA was renewed'" in m
        for m in messages
    )


def test_a_ca_renewed_by_another_replica_is_followed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "ansible_operator.webhooks")
    secrets = FakeApi()  # no CA yet: the operator makes one
    names = ["127.0.0.1"]

    async def scenario() -> None:
        serving = await tls.operator_made(
            secrets,
            ("ops", "ca"),
            names,
            tmp_path / "tls",
            LIFETIMES,
        )
        first = stored_ca(secrets)
        configs = Configurations()
        configs.bundle = serving.ca_bundle
        start = now()
        rotation = CertificateRotation(
            serving, names, tmp_path / "tls", LIFETIMES, configs.apply, bundle_applied_at=start
        )
        server = await asyncio.start_server(
            lambda r, w: w.close(), "127.0.0.1", 0, ssl=serving.context
        )
        port = server.sockets[0].getsockname()[1]
        try:
            theirs = tls.renewed(await rotation.store.read(), LIFETIMES, start)
            assert await rotation.store.write(theirs, await rotation.store.read())
            await rotation.step(start)
            assert configs.writes == [theirs.cert_pem + first.cert_pem]
            assert await trusted_by(port, first.cert_pem)
            await rotation.step(start + LIFETIMES.settle)
            assert await trusted_by(port, theirs.cert_pem)
        finally:
            server.close()

    asyncio.run(scenario())
    assert any(
        "webhook CA changed in Secret ops/ca (renewed by another replica)" in r.getMessage()
        for r in caplog.records
    )


def test_a_serving_certificate_past_two_thirds_is_issued_again_from_the_same_ca(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        serving = await tls.operator_made(None, None, ["127.0.0.1"], tmp_path, LIFETIMES)
        assert serving.issued is not None
        first = serving.issued
        rotation = CertificateRotation(
            serving, ["127.0.0.1"], tmp_path, LIFETIMES, None, bundle_applied_at=None
        )
        before = first.renew_at(LIFETIMES.serving_renew_at) - datetime.timedelta(seconds=1)
        await rotation.step(before)
        assert rotation.issued == first
        await rotation.step(before + datetime.timedelta(seconds=2))
        assert rotation.issued != first
        assert rotation.issued.ca_cert_pem == first.ca_cert_pem

    asyncio.run(scenario())


def test_lifetimes_from_the_environment() -> None:
    variable = tls.LIFETIMES_ENV
    lifetimes = tls.Lifetimes.from_environment(
        {variable: "ca=2h, ca-renew-before=1h,serving=10m,check-every=2s,settle=1s"}
    )
    assert lifetimes == tls.Lifetimes(
        ca=120 * MINUTE,
        ca_renew_before=60 * MINUTE,
        serving=10 * MINUTE,
        check_every=datetime.timedelta(seconds=2),
        settle=datetime.timedelta(seconds=1),
    )
    assert tls.Lifetimes.from_environment({}) == tls.Lifetimes()
    with pytest.raises(SystemExit, match=f"{variable}: unknown key 'ca-renew'"):
        tls.Lifetimes.from_environment({variable: "ca-renew=1h"})
    with pytest.raises(SystemExit, match=f"{variable}: 'ca=soon'"):
        tls.Lifetimes.from_environment({variable: "ca=soon"})
    with pytest.raises(SystemExit, match="ca-renew-before shorter than ca"):
        tls.Lifetimes.from_environment({variable: "ca=1h,ca-renew-before=2h"})


def test_the_configurations_are_applied_only_where_they_lack_the_bundle() -> None:
    hook = Webhook(
        name="check.example.com",
        type="validating",
        rules=(WebhookRule(("",), ("v1",), ("configmaps",), ("CREATE",)),),
        role=Path("roles/check"),
        playbook=None,
    )
    api = FakeApi()
    endpoint = Endpoint(url="https://127.0.0.1:9443")
    first, second = ca_ending_in(LIFETIMES.ca), ca_ending_in(LIFETIMES.ca)

    def apply(bundle: bytes) -> bool:
        return asyncio.run(configurations.apply_ca_bundle(api, "ops", [hook], endpoint, bundle))

    assert apply(first.cert_pem)
    assert not apply(first.cert_pem)
    assert apply(second.cert_pem + first.cert_pem)
    assert [(w.verb, w.plural) for w in api.writes] == [
        ("patch", "validatingwebhookconfigurations")
    ] * 2
    stored = api.held(configurations.VALIDATING, "ops", None)
    assert stored is not None
    [entry] = stored["webhooks"]
    held = base64.b64decode(entry["clientConfig"]["caBundle"])
    assert held == second.cert_pem + first.cert_pem
