"""`ansible-operator run` imports what an operator uses and no more: not the
other commands' code (scaffold, check, the local control plane), nor
cryptography for a kubeconfig with a token, without webhooks or
self-signed metrics. Each costs start-up time (issue 45: ready in a second on a
slow machine) and memory at rest. Checked in a fresh interpreter, after parsing
`run`'s flags as the CLI does, importing what `run` imports and reading a
kubeconfig."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

PROGRAM = """
import json, sys
from ansible_operator.cli import build_parser
build_parser().parse_args(["run"])
import ansible_operator.commands.run
import ansible_operator.manager.manager
import ansible_operator.project.watches
import ansible_operator.runner.warm.zygote
from ansible_operator.cluster import connect_config
connect_config(sys.argv[1])
print(json.dumps(sorted(name for name in sys.modules if name.startswith(tuple(sys.argv[2:])))))
"""
NOT_IMPORTED = (
    "cryptography",
    "ansible_operator.scaffold",
    "ansible_operator.commands.check",
    "ansible_operator.commands.reconcile",
    "ansible_operator.cluster.local",
    "ansible_operator.webhooks.service",
)


def test_the_operator_loads_no_other_command_and_no_certificate_code(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
                "users": [{"name": "u", "user": {"token": "secret"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(kubeconfig), *NOT_IMPORTED],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert json.loads(done.stdout.splitlines()[-1]) == []
