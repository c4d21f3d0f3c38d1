"""`ansible-operator cluster load` without a node: which image a name means,
what a Dockerfile starts FROM, what an archive is named, and the errors a
newcomer meets first."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from ansible_operator.cli import main
from ansible_operator.cluster import load as load_module
from ansible_operator.cluster import node as node_module
from ansible_operator.cluster.images import (
    OPERATOR,
    ImageBuilder,
    ImageError,
    docker_reference,
    dockerfile_bases,
)
from ansible_operator.cluster.node import NodeError, archive_names


@pytest.mark.parametrize(
    ("name", "reference"),
    [
        ("demo", "docker.io/library/demo:latest"),
        ("demo:v1", "docker.io/library/demo:v1"),
        ("me/demo", "docker.io/me/demo:latest"),
        ("localhost/demo:2", "localhost/demo:2"),
        ("reg.example.com:5000/team/op", "reg.example.com:5000/team/op:latest"),
        ("ghcr.io/me/op:1", "ghcr.io/me/op:1"),
        ("demo@sha256:ab", "docker.io/library/demo@sha256:ab"),
    ],
)
def test_names_are_loaded_as_kubelet_resolves_them(name: str, reference: str) -> None:
    assert docker_reference(name) == reference


def test_dockerfile_bases_resolve_args_and_skip_stages(tmp_path: Path) -> None:
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(
        "ARG BASE=ghcr.io/ansible-operator/ansible-operator:0.1.0\n"
        "FROM --platform=linux/amd64 docker.io/library/golang:1 AS build\n"
        "RUN true\n"
        "FROM ${BASE}\n"
        "COPY --from=build /x /x\n"
        "FROM build\n"
        "FROM scratch\n"
    )
    assert dockerfile_bases(dockerfile) == [
        (2, "docker.io/library/golang:1"),
        (4, "ghcr.io/ansible-operator/ansible-operator:0.1.0"),
    ]


def test_from_a_version_we_do_not_build_says_which_we_do(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text(
        "# the operator\nFROM ghcr.io/ansible-operator/ansible-operator:0.0.9\n"
    )
    builder = ImageBuilder(tmp_path / "store", progress=lambda _m: None)
    with pytest.raises(ImageError) as raised:
        builder.build_dockerfile("demo:1", tmp_path)
    assert f"{tmp_path / 'Dockerfile'}:2: FROM ghcr.io/ansible-operator/ansible-operator:0.0.9" in (
        str(raised.value)
    )
    assert OPERATOR in str(raised.value)


def _archive(path: Path, files: dict[str, object]) -> Path:
    with tarfile.open(path, "w") as tar:
        for name, content in files.items():
            data = json.dumps(content).encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_archive_names_of_oci_and_docker_archives(tmp_path: Path) -> None:
    oci = _archive(
        tmp_path / "oci.tar",
        {
            "oci-layout": {"imageLayoutVersion": "1.0.0"},
            "index.json": {
                "manifests": [{"annotations": {"org.opencontainers.image.ref.name": "demo:2"}}]
            },
        },
    )
    docker = _archive(tmp_path / "docker.tar", {"manifest.json": [{"RepoTags": ["me/op:1"]}]})
    bare_tag = _archive(
        tmp_path / "bare.tar",
        {
            "index.json": {
                "manifests": [{"annotations": {"org.opencontainers.image.ref.name": "1"}}]
            }
        },
    )
    assert archive_names(oci) == ["docker.io/library/demo:2"]
    assert archive_names(docker) == ["docker.io/me/op:1"]
    assert archive_names(bare_tag) == []  # nothing containerd could name
    not_an_image = _archive(tmp_path / "other.tar", {"hello.json": {}})
    with pytest.raises(NodeError, match="not an OCI or docker image archive"):
        archive_names(not_an_image)


def test_load_without_a_node_says_how_to_start_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(node_module, "RECORD", tmp_path / "node.json")
    assert main(["cluster", "load", "demo:1"]) == 1
    assert "'sudo ansible-operator cluster up --node'" in capsys.readouterr().err


def test_an_image_not_found_lists_what_the_store_has(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(load_module, "running_node", lambda: object())
    monkeypatch.setattr(ImageBuilder, "has", lambda _self, _name: False)
    monkeypatch.setattr(ImageBuilder, "stored", lambda _self: ["localhost/demo:1"])
    assert main(["cluster", "load", "demo:2"]) == 1
    error = capsys.readouterr().err
    assert "image demo:2 is not a file nor in ansible-operator's image store" in error
    assert "the store has: localhost/demo:1" in error
    assert "ansible-operator cluster load --build DIR demo:2" in error
