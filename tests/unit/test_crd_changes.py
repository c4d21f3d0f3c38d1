"""What `check` finds unsafe in a CRD change (conversion/crd_changes.py), and where
(lint/crds.py): each case the API server or stored objects would make someone regret."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from ansible_operator.conversion.crd_changes import changes, served_problems
from ansible_operator.lint.crds import crd_findings
from ansible_operator.project.watches import load_watches_file

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = yaml.safe_load((ROOT / "config/crd/bases/goharbor.io_harborclusters.yaml").read_text())


def version(crd: dict[str, Any], name: str) -> dict[str, Any]:
    return next(v for v in crd["spec"]["versions"] if v["name"] == name)


def spec_schema(crd: dict[str, Any], name: str) -> dict[str, Any]:
    return version(crd, name)["schema"]["openAPIV3Schema"]["properties"]["spec"]


def messages(found: list[Any]) -> list[str]:
    return [f"{p.severity} {p.version} {'.'.join(p.path)}: {p.message}" for p in found]


def test_the_sample_as_it_ships_is_safe_against_itself() -> None:
    assert changes(SAMPLE, SAMPLE) == []


def test_removing_a_version_still_stored_is_an_error_naming_the_migration() -> None:
    after = copy.deepcopy(SAMPLE)
    after["spec"]["versions"] = [version(after, "v1beta1")]
    before = {**SAMPLE, "status": {"storedVersions": ["v1alpha3", "v1beta1"]}}
    [problem] = changes(before, after)
    assert problem.severity == "error" and problem.version == "v1alpha3"
    assert "objects may be stored in it (storedVersions: v1alpha3, v1beta1)" in problem.message
    assert "ansible-operator migrate harborclusters.goharbor.io" in problem.message
    # once migrated, it may go
    assert changes({**SAMPLE, "status": {"storedVersions": ["v1beta1"]}}, after) == []


def test_removed_retyped_and_newly_required_fields_are_errors() -> None:
    after = copy.deepcopy(SAMPLE)
    spec = spec_schema(after, "v1beta1")
    del spec["properties"]["database"]["properties"]["storage"]
    spec["properties"]["cache"]["properties"]["replicas"] = {"type": "string"}
    spec["properties"]["tls"] = {"type": "object"}
    spec["required"] = [*spec["required"], "tls"]
    found = sorted(messages(changes(SAMPLE, after)))
    assert [line.split(":")[0] for line in found] == [
        "error v1beta1 spec.cache.replicas",
        "error v1beta1 spec.database.storage",
        "error v1beta1 spec.tls",
    ]
    assert "changes type from integer to string" in found[0]
    assert "the API server drops it from every stored object" in found[1]
    assert "newly required with no default" in found[2]
    # a default makes a new required field safe; preserve-unknown keeps what it does not name
    spec["properties"]["tls"]["default"] = {}
    assert len(changes(SAMPLE, after)) == 2


def test_moving_the_storage_version_warns_to_migrate() -> None:
    after = copy.deepcopy(SAMPLE)
    version(after, "v1alpha3")["storage"] = True
    version(after, "v1beta1")["storage"] = False
    [problem] = changes(SAMPLE, after)
    assert problem.severity == "warning"
    assert "moves from v1beta1 to v1alpha3" in problem.message


def test_versions_that_differ_with_no_conversion_are_an_error_unless_one_is_declared() -> None:
    lone = copy.deepcopy(SAMPLE)
    del lone["spec"]["conversion"]
    [problem] = served_problems(lone, None)
    assert problem.version == "v1beta1"
    assert "different schemas and no conversion" in problem.message
    [harbor] = [
        c
        for c in load_watches_file(ROOT / "watches.yaml", env={}, cwd=ROOT).conversions
        if c.kind == "HarborCluster"
    ]
    assert served_problems(lone, harbor) == []
    extra = copy.deepcopy(lone)
    extra["spec"]["versions"].append({**version(lone, "v1alpha3"), "name": "v1alpha4"})
    [unconverted] = served_problems(extra, harbor)
    assert unconverted.source.startswith(str(ROOT / "watches.yaml"))
    assert "serves version v1alpha4, which has no conversion declared" in unconverted.message


def test_findings_name_the_file_and_line_of_the_field(tmp_path: Path) -> None:
    bases = tmp_path / "config/crd/bases"
    bases.mkdir(parents=True)
    after = copy.deepcopy(SAMPLE)
    spec_schema(after, "v1beta1")["properties"]["cache"]["properties"]["replicas"]["type"] = (
        "string"
    )
    path = bases / "harborclusters.yaml"
    path.write_text(yaml.safe_dump(after, sort_keys=False))
    [finding] = crd_findings(tmp_path, [], lambda _: SAMPLE)
    lines = path.read_text().splitlines()
    assert finding.path == str(path)
    assert lines[finding.line - 1].strip() == "replicas:"
    assert "spec.cache.replicas changes type" in finding.message
