"""A new project's and the repository's builds, with the tools they call: a
fresh git clone has what the Dockerfiles copy, and the Makefile's targets."""

from __future__ import annotations

import fnmatch
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_operator.cli import main


def init(project: Path, *extra: str) -> int:
    return main(["init", "--domain", "example.com", "--dir", str(project), *extra])


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "memcached-operator"
    assert init(path) == 0
    return path


# -- what the Dockerfiles copy ----------------------------------------------------------

REPO = Path(__file__).resolve().parents[2]


def copied_sources(dockerfile: Path) -> list[str]:
    """The sources of each COPY line (the last word is the destination)."""
    sources = []
    for line in dockerfile.read_text().splitlines():
        words = line.split()
        if words[:1] == ["COPY"]:
            sources += [w for w in words[1:-1] if not w.startswith("--")]
    return sources


def git_tracked(directory: Path) -> set[str]:
    """What a clone of `directory` would hold, once everything in it is committed."""
    if not (directory / ".git").exists():
        subprocess.run(["git", "init", "-q", str(directory)], check=True)
        subprocess.run(["git", "-C", str(directory), "add", "-A"], check=True)
        listing = ["git", "-C", str(directory), "ls-files", "--cached"]
    else:
        listing = ["git", "-C", str(directory), "ls-files", "--cached", "--others",
                   "--exclude-standard"]  # fmt: skip
    return set(subprocess.run(listing, check=True, capture_output=True, text=True).stdout.split())


def dockerignored(directory: Path, path: str) -> bool:
    patterns = [
        line.strip().rstrip("/")
        for line in (directory / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    parts = Path(path).parts
    return any(
        fnmatch.fnmatch("/".join(parts[: n + 1]), pattern.removeprefix("**/"))
        or fnmatch.fnmatch(parts[n], pattern.removeprefix("**/"))
        for pattern in patterns
        for n in range(len(parts))
    )


def assert_copies_survive_a_clone(directory: Path, dockerfile: Path) -> None:
    tracked = git_tracked(directory)
    for source in copied_sources(dockerfile):
        prefix = source.strip("./")
        in_context = [
            f
            for f in tracked
            if (not prefix or f == prefix or f.startswith(prefix + "/"))
            and not dockerignored(directory, f)
        ]
        assert in_context, f"{dockerfile.name} copies {source}, which a clone lacks"


@pytest.mark.skipif(not shutil.which("git"), reason="needs git")
def test_a_fresh_clone_of_a_new_project_has_everything_its_dockerfile_copies(
    project: Path,
) -> None:
    assert_copies_survive_a_clone(project, project / "Dockerfile")
    assert dockerignored(project, ".venv/lib/python3.12/site.py")
    assert dockerignored(project, ".git/HEAD")
    assert dockerignored(project, "roles/x/__pycache__/a.pyc")


@pytest.mark.skipif(not shutil.which("git"), reason="needs git")
@pytest.mark.parametrize("dockerfile", ["Dockerfile", "Dockerfile.samples"])
def test_the_repositorys_dockerfiles_copy_only_what_it_holds(dockerfile: str) -> None:
    assert_copies_survive_a_clone(REPO, REPO / dockerfile)
    assert dockerignored(REPO, ".venv/bin/python")
    assert dockerignored(REPO, ".git/config")
    assert dockerignored(REPO, "src/ansible_operator/__pycache__/cli.cpython-312.pyc")
    # what Dockerfile's install step (scripts/install-runtime.sh) builds from
    for needed in ("pyproject.toml", "README.md", "constraints.txt", "scripts/install-runtime.sh"):
        assert not dockerignored(REPO, needed)


# -- the Makefile -----------------------------------------------------------------------


def with_the_tool() -> dict[str, str]:
    """The environment with this Python's ansible-operator first on PATH, as after
    `pip install` (the Makefile looks it up there)."""
    bin_dir = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


@pytest.mark.skipif(not shutil.which("make"), reason="needs make")
@pytest.mark.parametrize(
    ("target", "commands"),
    [
        (
            "run",
            [
                "kubectl apply -k config/crd",  # `make run` needs the CRDs: it installs them
                # loopback and free ports: a second local operator does not collide
                "ansible-operator run --watches-file=./watches.yaml "
                "--health-probe-bind-address=127.0.0.1:0 --metrics-bind-address=127.0.0.1:0 "
                "--proxy-port=0",
            ],
        ),
        # FROM the base image in ansible-operator's own store: nothing to pull
        ("docker-build", ["ansible-operator cluster load --build . --no-load IMG"]),
        ("image-build", ["ansible-operator cluster load --build . --no-load IMG"]),
        ("image-load", ["ansible-operator cluster load --build . IMG"]),
        (
            "dev",
            [
                "ansible-operator check --strict .",  # an RBAC gap stops it before the build
                "ansible-operator cluster load --build . IMG",
                # RBAC and CRD edits reach the cluster too
                "kubectl kustomize config/default",
                "kubectl -n memcached-operator-system delete pod "
                "-l app.kubernetes.io/name=memcached-operator --wait=false",
            ],
        ),
        ("docker-push", ["TOOL push reg.example.com/me/op:v2"]),
        ("image-push", ["TOOL push reg.example.com/me/op:v2"]),
        ("install", ["kubectl apply -k config/crd"]),
        ("uninstall", ["kubectl delete --ignore-not-found=false -k config/crd"]),
        (
            "deploy",
            [
                "ansible-operator check --strict .",
                "kubectl kustomize config/default",
                "sed 's|image: memcached-operator:latest$|image: reg.example.com/me/op:v2|'",
                "kubectl apply -f -",
            ],
        ),
        ("undeploy", ["kubectl delete --ignore-not-found=false -k config/default"]),
        # pytest with the tool's own Python, where its plugin is
        ("test", [f"{sys.executable} -m pytest tests"]),
        ("check", ["ansible-operator check --strict ."]),
    ],
)
def test_make_targets_of_a_new_project(project: Path, target: str, commands: list[str]) -> None:
    done = subprocess.run(
        ["make", "-n", target, "IMG=reg.example.com/me/op:v2"],
        cwd=project,
        env=with_the_tool(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    printed = " ".join(done.stdout.replace("\\\n", " ").split())
    tool = next((t for t in ("buildah", "docker", "podman") if shutil.which(t)), "podman")
    for command in commands:
        assert command.replace("TOOL", tool).replace("IMG", "reg.example.com/me/op:v2") in printed


@pytest.mark.skipif(not shutil.which("make"), reason="needs make")
@pytest.mark.parametrize(
    ("target", "command"),
    [
        ("deploy", "kubectl kustomize config/sharding |"),
        ("undeploy", "kubectl delete --ignore-not-found=false -k config/sharding"),
    ],
)
def test_make_deploys_the_shard_ring_when_asked(project: Path, target: str, command: str) -> None:
    done = subprocess.run(
        ["make", "-n", target, "DEPLOY_CONFIG=config/sharding"],
        cwd=project,
        env=with_the_tool(),
        capture_output=True,
        text=True,
        check=True,
    )
    assert command in " ".join(done.stdout.replace("\\\n", " ").split())


@pytest.mark.skipif(not shutil.which("make"), reason="needs make")
def test_make_picks_the_container_tool_given(project: Path) -> None:
    done = subprocess.run(
        ["make", "-n", "docker-build", "CONTAINER_TOOL=podman"],
        cwd=project,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "podman build -t memcached-operator:latest ."
