"""Tracing off (no OTLP endpoint in the environment), an operator's process
never imports OpenTelemetry: the SDK and its exporter (protobuf, requests'
session) cost start-up time and memory that an operator without a collector
should not pay. Checked in a fresh interpreter, after importing what
`ansible-operator run` imports and asking for tracing as the manager does."""

from __future__ import annotations

import json
import os
import subprocess
import sys

PROGRAM = """
import json, sys
import ansible_operator.cli
import ansible_operator.commands.run
import ansible_operator.manager.manager
from ansible_operator.observability.tracing import from_environment
tracing = from_environment()
loaded = sorted(name for name in sys.modules if name.startswith("opentelemetry")
                or name in ("ansible_operator.observability.otel", "google.protobuf"))
print(json.dumps({"enabled": tracing.enabled, "loaded": loaded}))
"""


def run(env: dict[str, str]) -> dict[str, object]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout.splitlines()[-1])


def test_without_an_endpoint_the_operator_loads_nothing_of_opentelemetry() -> None:
    assert run({"OTEL_SERVICE_NAME": "memcached-operator"}) == {"enabled": False, "loaded": []}


def test_with_an_endpoint_it_loads_the_sdk() -> None:
    found = run({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"})
    assert found["enabled"] is True
    assert "opentelemetry.sdk.trace" in found["loaded"]  # type: ignore[operator]
