"""`ansible-operator check --crd-baseline REVISION`: an unsafe CRD change, against the CRD
a git revision has, is reported at the file and line of each field, before it ships."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from ansible_operator.cli import main

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [
            {
                "name": name,
                "served": True,
                "storage": name == "v1",
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {
                                    "size": {"type": "integer"},
                                    "image": {"type": "string"},
                                },
                            }
                        },
                    }
                },
            }
            for name in ("v1alpha1", "v1")
        ],
    },
}
WATCHES = """\
- {version: v1, group: example.com, kind: Widget, role: widget}
- conversion:
    group: example.com
    kind: Widget
    hub: v1
    versions:
      - version: v1alpha1
        fieldMap:
          - {hub: spec.size, spoke: spec.size}
"""


def git(project: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(project), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        check=True,
        capture_output=True,
    )


def test_an_unsafe_crd_change_is_reported_at_its_lines_against_a_revision(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    project = tmp_path / "widget-operator"
    (project / "roles/widget/tasks").mkdir(parents=True)
    (project / "roles/widget/tasks/main.yml").write_text("- debug: {msg: hello}\n")
    (project / "watches.yaml").write_text(WATCHES)
    crd_file = project / "config/crd/bases/example.com_widgets.yaml"
    crd_file.parent.mkdir(parents=True)
    crd_file.write_text(yaml.safe_dump(CRD, sort_keys=False))
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "v1alpha1 and v1")
    assert main(["check", str(project), "--crd-baseline", "HEAD"]) == 0
    capsys.readouterr()

    # The next version of the CRD: v1alpha1 dropped, spec.image removed, spec.size
    # retyped, spec.owner required with no default; v1 becomes the only version.
    changed = yaml.safe_load(crd_file.read_text())
    v1 = changed["spec"]["versions"][1]
    changed["spec"]["versions"] = [v1]
    spec = v1["schema"]["openAPIV3Schema"]["properties"]["spec"]
    del spec["properties"]["image"]
    spec["properties"]["size"] = {"type": "string"}
    spec["properties"]["owner"] = {"type": "string"}
    spec["required"] = ["owner"]
    crd_file.write_text(yaml.safe_dump(changed, sort_keys=False))
    (project / "watches.yaml").write_text(WATCHES.split("- conversion:")[0])

    assert main(["check", str(project), "--crd-baseline", "HEAD"]) == 1
    out = capsys.readouterr().out
    lines = crd_file.read_text().splitlines()
    reported = {
        line.split(": error: ")[1].split(" ")[0]: int(line.split(":")[1])
        for line in out.splitlines()
        if line.startswith(str(crd_file)) and ": error: " in line
    }
    assert set(reported) == {"spec.image", "spec.size", "spec.owner"}
    assert lines[reported["spec.size"] - 1].strip() == "size:"
    assert lines[reported["spec.owner"] - 1].strip() == "owner:"
    assert "spec.size changes type from integer to string" in out
    assert "spec.image is removed: the API server drops it from every stored object" in out
    assert "spec.owner is newly required with no default" in out

    # At that revision v1 was the storage version, so dropping v1alpha1 was not reported;
    # against a revision where v1alpha1 is the storage version, it is, naming the migration.
    v0 = yaml.safe_load(crd_file.read_text())
    git(project, "checkout", "-q", "--", str(crd_file))
    baseline = yaml.safe_load(crd_file.read_text())
    for version in baseline["spec"]["versions"]:
        version["storage"] = version["name"] == "v1alpha1"
    crd_file.write_text(yaml.safe_dump(baseline, sort_keys=False))
    git(project, "commit", "-qam", "v1alpha1 stored")
    crd_file.write_text(yaml.safe_dump(v0, sort_keys=False))
    assert main(["check", str(project), "--crd-baseline", "HEAD"]) == 1
    out = capsys.readouterr().out
    assert "version v1alpha1 is removed but objects may be stored in it" in out
    assert "ansible-operator migrate widgets.example.com" in out


def test_a_revision_that_does_not_exist_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    project = tmp_path / "p"
    project.mkdir()
    git(project, "init", "-q")
    assert main(["check", str(project), "--crd-baseline", "nope"]) == 2
    assert "--crd-baseline: no git revision 'nope'" in capsys.readouterr().err
