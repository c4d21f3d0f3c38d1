"""Build the control-plane multi-call binary from controlplane/ and cache it.

The binary is cached per machine under the user cache dir, keyed by a hash
of the Go sources, go.mod/go.sum, the Go version and the build flags, so tests,
CI and the demo build it once (a cold build takes minutes; a cached one, none).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

SOURCE_ENV = "ANSIBLE_OPERATOR_CONTROLPLANE_SRC"
CACHE_ENV = "ANSIBLE_OPERATOR_CACHE_DIR"
BINARY_ENV = "ANSIBLE_OPERATOR_CONTROLPLANE_BIN"


class BuildError(RuntimeError):
    """The control plane could not be built; the message says what to do."""


def cache_root() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ansible-operator"


def source_dir() -> Path:
    if os.environ.get(SOURCE_ENV):
        return Path(os.environ[SOURCE_ENV])
    # An editable install or a checkout: src/ansible_operator/cluster -> repo root.
    candidate = Path(__file__).resolve().parents[3] / "controlplane"
    if (candidate / "go.mod").exists():
        return candidate
    raise BuildError(
        f"cannot find the controlplane/ Go module (looked in {candidate}); set {SOURCE_ENV} "
        "to its path, or use an existing cluster with KUBECONFIG or envtest binaries "
        "with KUBEBUILDER_ASSETS"
    )


def kubernetes_version(src: Path) -> str:
    match = re.search(
        r"^\s*k8s\.io/kubernetes\s+(v\d+\.\d+\.\d+)", (src / "go.mod").read_text(), re.M
    )
    if not match:
        raise BuildError(f"{src / 'go.mod'}: no k8s.io/kubernetes requirement")
    return match.group(1)


def ldflags(version: str) -> str:
    major, minor = version.lstrip("v").split(".")[:2]
    flags = ["-s", "-w", f"-X main.version={version}"]
    # Without these stamps /version reports v0.0.0 and clients warn about skew.
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {package}.gitVersion={version}",
            f"-X {package}.gitMajor={major}",
            f"-X {package}.gitMinor={minor}",
            f"-X {package}.gitTreeState=clean",
        ]
    return " ".join(flags)


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise BuildError(
            "Go is not installed (no 'go' on PATH). The local control plane is built from "
            "controlplane/ with Go >= 1.26. Install Go, or point KUBECONFIG at an existing "
            "cluster, or KUBEBUILDER_ASSETS at envtest binaries."
        )
    return go


def _go_version(go: str) -> str:
    return subprocess.run(
        [go, "version"], capture_output=True, text=True, check=True
    ).stdout.strip()


def source_hash(src: Path, go_version: str) -> str:
    digest = hashlib.sha256()
    for path in sorted([*src.glob("*.go"), src / "go.mod", src / "go.sum"]):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    digest.update(go_version.encode())
    digest.update(ldflags(kubernetes_version(src)).encode())
    return digest.hexdigest()[:16]


def build_command(go: str, output: Path, version: str) -> list[str]:
    return [
        go,
        "build",
        "-p",
        "2",
        "-trimpath",
        "-ldflags",
        ldflags(version),
        "-o",
        str(output),
        ".",
    ]


def build_env() -> dict[str, str]:
    env = dict(os.environ)
    # A newer `go` line must fail at once, not download a toolchain (no internet here).
    env.update(GOTOOLCHAIN="local", GOWORK="off", CGO_ENABLED="0")
    return env


def ensure_binary(progress: Callable[[str], None] | None = None) -> Path:
    """Return the path of the built binary, building it if it is not cached."""
    if os.environ.get(BINARY_ENV):
        return Path(os.environ[BINARY_ENV])
    say = progress or (lambda message: print(message, file=sys.stderr))
    src = source_dir()
    go = _go()
    key = source_hash(src, _go_version(go))
    directory = cache_root() / "controlplane" / key
    binary = directory / "controlplane"
    if binary.exists():
        return binary
    directory.mkdir(parents=True, exist_ok=True)
    # One build at a time: a second caller (a test tier while `./dev test` builds it in
    # the background) waits for the first and takes its binary.
    with (directory / "build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if binary.exists():
            return binary
        return _build(go, src, directory, binary, say)


def _build(go: str, src: Path, directory: Path, binary: Path, say: Callable[[str], None]) -> Path:
    version = kubernetes_version(src)
    log = directory / "build.log"
    partial = directory / "controlplane.partial"
    command = build_command(go, partial, version)
    say(
        f"building the local control plane (kubernetes {version}) from {src}; "
        f"a cold build takes several minutes; log: {log}"
    )
    with log.open("w") as handle:
        handle.write("$ " + " ".join(command) + f"\n(in {src})\n")
        handle.flush()
        result = subprocess.run(
            command, cwd=src, env=build_env(), stdout=handle, stderr=subprocess.STDOUT, check=False
        )
    if result.returncode != 0:
        tail = "".join(log.read_text().splitlines(keepends=True)[-15:])
        raise BuildError(
            f"building the control plane failed (exit {result.returncode}).\n"
            f"command: (cd {src} && GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 "
            f"{' '.join(command)})\nfull log: {log}\nlast lines:\n{tail}"
        )
    partial.rename(binary)
    return binary
