"""What a run must not let out: learnt from its events, redacted by value."""

from __future__ import annotations

import base64
import json
import stat
from pathlib import Path

import pytest

from ansible_operator.runner.redaction import (
    REDACTED,
    SENSITIVE_EVENT,
    Redactor,
    redact_artifacts,
    secret_values,
    templated_values,
)

TOKEN = "s3cr3t-token-value"
ENCODED = base64.b64encode(TOKEN.encode()).decode()


def k8s_info_of_a_secret() -> dict[str, object]:
    return {
        "event": "runner_on_ok",
        "event_data": {
            "res": {"resources": [{"kind": "Secret", "data": {"token": ENCODED}}]},
        },
    }


def test_values_read_from_a_secret_are_redacted_in_any_later_text() -> None:
    redactor = Redactor()
    redactor.learn(k8s_info_of_a_secret())
    echoed = f"Failed to load resource definition: ...\n  token: {TOKEN}: broken\n  ^"
    assert TOKEN not in redactor.text(echoed)
    assert REDACTED in redactor.text(echoed)
    assert ENCODED not in redactor.text(f"data: {ENCODED}")


@pytest.mark.parametrize(
    "definition",
    [
        "apiVersion: v1\nkind: Secret\nstringData:\n  password: s3cr3t-token-value\n",
        '{"kind": "Secret", "data": {"password": "' + ENCODED + '"}}',
    ],
)
def test_secrets_given_as_yaml_or_json_strings_are_learnt(definition: str) -> None:
    found = set(secret_values({"invocation": {"module_args": {"definition": definition}}}))
    assert TOKEN in found


def test_a_secret_definition_that_does_not_parse_still_gives_its_values() -> None:
    broken = f"kind: Secret\nstringData:\n  password: {TOKEN}: broken\nother: x\n"
    redactor = Redactor()
    redactor.learn({"event": "runner_on_failed", "event_data": {"res": {"args": broken}}})
    assert TOKEN not in redactor.text(
        f"mapping values are not allowed here\n password: {TOKEN}: broken"
    )


def test_a_structure_keeps_its_shape_and_loses_secret_data() -> None:
    redactor = Redactor()
    result = {"resources": [{"kind": "Secret", "metadata": {"name": "s"}, "data": {"k": "dmFs"}}]}
    redacted = redactor.value(result)
    assert redacted["resources"][0]["data"] == {"k": REDACTED}
    assert redacted["resources"][0]["metadata"] == {"name": "s"}


@pytest.mark.parametrize(
    ("raw", "rendered", "expected"),
    [
        ("{{ password }}", "hunter22", ["hunter22"]),
        ("the password is {{ pw }}", "the password is hunter22", ["hunter22"]),
        ("literal text", "literal text", []),
        ({"state": "present", "token": "{{ t }}"}, {"state": "present", "token": "abcd"}, ["abcd"]),
        ("{{ secret_def }}", {"kind": "Secret", "stringData": {"p": "qwerty"}}, ["qwerty"]),
        (None, {"msg": "whole"}, ["whole"]),
    ],
)
def test_no_log_values_are_what_templating_put_in_the_arguments(
    raw: object, rendered: object, expected: list[str]
) -> None:
    assert templated_values(raw, rendered) == expected


def test_short_values_are_not_redacted() -> None:
    redactor = Redactor()
    redactor.learn({"event": SENSITIVE_EVENT, "values": ["yes", "a-long-enough-value"]})
    assert redactor.text("yes, a-long-enough-value") == f"yes, {REDACTED}"


def test_a_no_log_tasks_output_shows_only_its_hidden_result() -> None:
    event = {
        "event": "runner_on_failed",
        "stdout": "[ERROR]: Task failed: the password is hunter22\nfatal: [localhost]: FAILED!",
        "event_data": {"host": "localhost", "res": {"censored": "hidden"}},
    }
    shown = Redactor().stdout(event)
    assert "hunter22" not in shown
    assert "censored" in shown


def test_artifacts_are_redacted_and_private(tmp_path: Path) -> None:
    redactor = Redactor()
    redactor.add(TOKEN)
    events = tmp_path / "job_events"
    events.mkdir()
    (events / "1-a.json").write_text(json.dumps({"stdout": TOKEN, "event_data": {"x": TOKEN}}))
    (tmp_path / "stdout").write_text(f"printed {TOKEN}\n")
    cache = tmp_path / "fact_cache"
    cache.mkdir()
    (cache / "localhost").write_text(json.dumps({"the_password": TOKEN}))
    (cache / "localhost").chmod(0o644)
    redact_artifacts(tmp_path, redactor)
    for path in [events / "1-a.json", tmp_path / "stdout", cache / "localhost"]:
        assert TOKEN not in path.read_text()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
