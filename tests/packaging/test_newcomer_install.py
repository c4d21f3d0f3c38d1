"""A newcomer's path from a built wheel, as the README's "Starting a new
operator" has it: `pip install` the wheel into a fresh virtual environment
(no checkout on the path), then `ansible-operator init`, `create api`,
`check --strict` and the project's own tests through its Makefile (`make test`
finds the tool's Python, where the pytest plugin is)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest

from ansible_operator.cluster import Cluster

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.cluster,  # the project's own test runs its operator against an API server
    pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed"),
]


def clean_env(bin_dir: Path, **extra: str) -> dict[str, str]:
    """The environment a newcomer's shell has: the venv first on PATH, nothing of
    this checkout (no PYTHONPATH), pip's cache as it is."""
    keep = ("HOME", "LANG", "LC_ALL", "TMPDIR", "XDG_CACHE_HOME", "PIP_INDEX_URL")
    env = {key: os.environ[key] for key in keep if key in os.environ}
    system_path = "/usr/local/bin:/usr/bin:/bin"
    return {**env, "PATH": f"{bin_dir}{os.pathsep}{system_path}", **extra}


def run(args: list[str], cwd: Path, env: dict[str, str], timeout: float = 600) -> str:
    done = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{args}: {done.stdout[-4000:]}{done.stderr[-4000:]}"
    return done.stdout + done.stderr


@pytest.fixture(scope="module")
def tool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The bin/ of a fresh venv holding ansible-operator from its wheel, and
    kubernetes.core (from PyPI's pinned `ansible` release: no Galaxy here)."""
    here = tmp_path_factory.mktemp("newcomer")
    wheels = here / "dist"
    build_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "-w",
            str(wheels),
            str(ROOT),
        ],
        here,
        build_env,
    )
    wheel = next(wheels.glob("ansible_operator-*.whl"))
    venv.create(here / "venv", with_pip=True)
    bin_dir = here / "venv" / "bin"
    env = clean_env(bin_dir)
    constraints = str(ROOT / "constraints.txt")
    run(["pip", "install", "--quiet", "-c", constraints, str(wheel)], here, env)
    run(
        ["python", str(ROOT / "scripts/install_kubernetes_core.py"), "--constraints", constraints],
        here,
        env,
    )
    yield bin_dir


def test_a_wheel_gives_the_tool_and_a_project_that_passes_its_tests(
    tool: Path, kube_cluster: Cluster, tmp_path: Path
) -> None:
    env = clean_env(tool, KUBECONFIG=str(kube_cluster.kubeconfig))
    project = tmp_path / "memcached-operator"
    project.mkdir()
    run(["ansible-operator", "init", "--domain", "example.com"], project, env)
    run(
        ["ansible-operator", "create", "api", "--group", "cache", "--version", "v1alpha1",
         "--kind", "Memcached", "--generate-role"],
        project,
        env,
    )  # fmt: skip
    checked = run(["ansible-operator", "check", "--strict"], project, env)
    assert "no problems found in 1 role, 0 playbooks" in checked

    tested = run(["make", "test"], project, env, timeout=900)
    assert "1 passed in" in tested  # no warning either (pytest.ini's option is pytest-asyncio's)
    assert str(tool / "python") in tested  # the tool's own Python ran pytest


def test_the_makefile_says_what_to_do_when_the_tool_is_missing(tool: Path, tmp_path: Path) -> None:
    env = clean_env(tool)
    run(["ansible-operator", "init", "--domain", "example.com"], tmp_path, env)
    done = subprocess.run(
        ["make", "deploy", "ANSIBLE_OPERATOR=no-such-tool"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert (
        "ANSIBLE_OPERATOR=no-such-tool is not a command: install ansible-operator "
        "(pip install ansible-operator, or pipx install ansible-operator) or name it with "
        "make ANSIBLE_OPERATOR=/path/to/ansible-operator"
    ) in done.stderr
