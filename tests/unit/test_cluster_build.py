"""How the control-plane binary is built and cached, without running Go."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_operator.cluster import build


@pytest.fixture
def source(tmp_path: Path) -> Path:
    src = tmp_path / "controlplane"
    src.mkdir()
    (src / "go.mod").write_text("module x\n\nrequire (\n\tk8s.io/kubernetes v1.36.3\n)\n")
    (src / "go.sum").write_text("")
    (src / "main.go").write_text("package main\n")
    return src


def test_version_is_read_from_go_mod(source: Path) -> None:
    assert build.kubernetes_version(source) == "v1.36.3"


def test_ldflags_stamp_both_version_packages() -> None:
    flags = build.ldflags("v1.36.3")
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        assert f"-X {package}.gitVersion=v1.36.3" in flags
        assert f"-X {package}.gitMinor=36" in flags


def test_cache_key_changes_with_sources_and_go_version(source: Path) -> None:
    key = build.source_hash(source, "go1.26.8")
    assert key == build.source_hash(source, "go1.26.8")
    assert key != build.source_hash(source, "go1.27.0")
    (source / "main.go").write_text("package main\n// changed\n")
    assert key != build.source_hash(source, "go1.26.8")


def test_missing_go_names_the_problem_and_the_alternatives(
    source: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(build.SOURCE_ENV, str(source))
    monkeypatch.delenv(build.BINARY_ENV, raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(build.BuildError) as error:
        build.ensure_binary()
    message = str(error.value)
    assert "Go is not installed" in message
    assert "KUBECONFIG" in message and "KUBEBUILDER_ASSETS" in message
