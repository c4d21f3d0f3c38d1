"""The settings are declared once, and the command line and the docs follow from them."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from ansible_operator.commands.run import add_run_arguments
from ansible_operator.settings import Settings
from ansible_operator.settings.flags import add_flags, every_setting, flagged, settings_from

REFERENCE = Path(__file__).parents[2] / "docs" / "reference.md"


def parsed(*argv: str, environ: dict[str, str] | None = None) -> Settings:
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    return settings_from(parser.parse_args(list(argv)), environ or {})


def documented_flags() -> set[str]:
    text = REFERENCE.read_text()
    table = text.split("## `ansible-operator run` flags", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `")]
    return {flag for row in rows for flag in re.findall(r"`(--[a-z-]+)`", row)}


def test_every_run_flag_is_in_the_reference_table_and_only_those() -> None:
    generated = {name for each in flagged() for name in each.declaration.flags}
    documented = documented_flags()
    assert generated - documented == set(), "document these in docs/reference.md"
    assert documented - generated == set(), "docs/reference.md lists flags run does not have"


def test_no_flag_given_gives_the_sections_defaults() -> None:
    assert parsed() == Settings()


def test_a_flag_reaches_its_section_as_the_program_uses_it() -> None:
    settings = parsed(
        "--reconcile-period=1m30s",
        "--run-timeout=0",
        "--max-run-output=1Ki",
        "--max-concurrent-reconciles=0",
        "--ansible-args='--tags x'",
        "--inject-owner-ref=false",
        "--leader-elect",
        "--metrics-addr=:8080",
        "--disable-acceleration=template-cache",
        "--disable-acceleration=plugin-preload,settings-read-once",
    )
    assert settings.runs.reconcile_period == 90.0
    assert settings.runs.run_timeout is None  # 0: never
    assert settings.runs.max_run_output == 1024
    assert settings.runs.max_concurrent_reconciles == 1  # at least one worker
    assert settings.ansible.args == "--tags x"  # one pair of quotes stripped
    assert settings.proxy.inject_owner_ref is False
    assert settings.leader_election.enabled is True
    assert settings.metrics.bind_address == ":8080"
    assert settings.runs.disabled_accelerations == (
        "template-cache",
        "plugin-preload",
        "settings-read-once",
    )


def test_environment_settings_are_read_from_their_variables() -> None:
    settings = parsed(
        environ={
            "WATCH_NAMESPACE": "a, b,",
            "ANSIBLE_INVENTORY": "/inventory",
            "ANSIBLE_DEBUG_LOGS": "True",
            "ANSIBLE_GATHERING": "implicit",
        }
    )
    assert settings.watching.namespaces == ("a", "b")
    assert settings.ansible.inventory == Path("/inventory")
    assert settings.ansible.debug_logs is True
    assert settings.ansible.skip_facts is False


def test_an_environment_variable_gives_a_flag_its_default() -> None:
    parser = argparse.ArgumentParser()
    add_flags(
        parser, only=["--webhook-client-ca"], environ={"ANSIBLE_OPERATOR_WEBHOOK_CLIENT_CA": "/ca"}
    )
    assert settings_from(parser.parse_args([]), {}).webhooks.client_ca == Path("/ca")
    given = settings_from(parser.parse_args(["--webhook-client-ca", "/other"]), {})
    assert given.webhooks.client_ca == Path("/other")


@pytest.mark.parametrize(
    "argv",
    [
        ["--reconcile-period=soon"],
        ["--leader-elect=maybe"],
        ["--ansible-verbosity=8"],
        ["--webhook-service=svc"],
        ["--disable-acceleration=tmeplate-cache"],
    ],
)
def test_a_malformed_value_stops_at_the_flag(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        parsed(*argv)
    assert argv[0].split("=")[0] in capsys.readouterr().err


def test_every_setting_has_one_source_and_a_unique_flag() -> None:
    flags = [name for each in flagged() for name in each.declaration.flags]
    assert len(flags) == len(set(flags))
    for each in every_setting():
        declared = each.declaration
        assert not (declared.flags and declared.from_env), each.dest


def test_a_flag_lands_in_its_section_and_nowhere_else() -> None:
    settings = parsed("--leader-election-id=op", "--webhook-url=https://x", "--proxy-port=0")
    assert settings.leader_election.id == "op"
    assert settings.webhooks.url == "https://x"
    assert settings.proxy.port == 0
    with pytest.raises(AttributeError):
        _ = settings.leader_election_id  # the former flat names are gone
