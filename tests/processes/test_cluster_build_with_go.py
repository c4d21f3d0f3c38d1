"""A control-plane build that fails under a real `go build` names the command
and its log."""

from __future__ import annotations

import shutil
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


def test_failed_build_names_the_command_and_the_log(
    source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if shutil.which("go") is None:
        pytest.skip("needs a go command to fail")
    (source / "go.mod").write_text("module x\n\ngo 1.26\n")
    (source / "main.go").write_text("package main\nthis is not go\n")
    monkeypatch.setattr(build, "kubernetes_version", lambda _src: "v1.36.3")
    monkeypatch.setenv(build.SOURCE_ENV, str(source))
    monkeypatch.setenv(build.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(build.BINARY_ENV, raising=False)
    with pytest.raises(build.BuildError) as error:
        build.ensure_binary(progress=lambda _m: None)
    message = str(error.value)
    assert "go build" in message
    assert "full log: " in message
    log = Path(message.split("full log: ")[1].split("\n")[0])
    assert log.exists()
    assert "main.go" in log.read_text()
