"""The shard-ring overlays build with `kubectl kustomize`, as their comments say to
deploy them, into exactly what tests/kustomize_render.py (which the unit tests
check) makes of them; and their `test` steps refuse a manager.yaml they no longer
fit, rather than patching the wrong argument."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_operator.cli import main
from kustomize_render import render

pytestmark = pytest.mark.skipif(
    not shutil.which("kubectl"), reason="needs kubectl (kubectl kustomize)"
)

REPO = Path(__file__).resolve().parents[2]


def kustomize(directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kubectl", "kustomize", "--load-restrictor=LoadRestrictionsNone", str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def by_key(docs: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d for d in docs}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sharding") / "memcached-operator"
    assert main(["init", "--domain", "example.com", "--dir", str(path)]) == 0
    return path


@pytest.mark.parametrize("where", ["repository", "new project"])
def test_kubectl_builds_what_the_unit_tests_check(where: str, project: Path) -> None:
    overlay = (REPO if where == "repository" else project) / "config" / "sharding"

    built = kustomize(overlay)

    assert built.returncode == 0, built.stderr
    rendered = [doc for doc in yaml.safe_load_all(built.stdout) if doc]
    assert by_key(rendered) == by_key(render(overlay))


def test_a_manager_the_patch_no_longer_fits_fails_the_build(tmp_path: Path) -> None:
    config = tmp_path / "config"
    shutil.copytree(REPO / "config", config, ignore=shutil.ignore_patterns("crd", "samples"))
    manager = config / "manager" / "manager.yaml"
    manager.write_text(manager.read_text().replace("- --leader-elect\n", "- --zap-devel\n"))

    built = kustomize(config / "sharding")

    assert built.returncode != 0
    assert "/spec/template/spec/containers/0/args/0" in built.stderr
