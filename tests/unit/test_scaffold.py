"""`ansible-operator init` and `create api`: the files they write, without a cluster."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

from ansible_operator import __version__
from ansible_operator.cli import main
from ansible_operator.scaffold import plural_of
from ansible_operator.watches import load_watches


def init(project: Path, *extra: str) -> int:
    return main(["init", "--domain", "example.com", "--dir", str(project), *extra])


def create(project: Path, kind: str, *, group: str = "cache", how: str = "role") -> int:
    return main(
        [
            "create",
            "api",
            "--group",
            group,
            "--version",
            "v1alpha1",
            "--kind",
            kind,
            f"--generate-{how}",
            "--dir",
            str(project),
        ]
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "memcached-operator"
    assert init(path) == 0
    return path


def load_yaml(path: Path) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


@pytest.mark.parametrize(
    ("kind", "plural"),
    [
        ("Memcached", "memcacheds"),
        ("Policy", "policies"),
        ("Gateway", "gateways"),
        ("Address", "addresses"),
        ("Box", "boxes"),
        ("Patch", "patches"),
        ("Mesh", "meshes"),
    ],
)
def test_plural(kind: str, plural: str) -> None:
    assert plural_of(kind) == plural


def test_init_writes_a_project_skeleton(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    project = tmp_path / "memcached-operator"
    assert init(project) == 0
    assert "created config/manager/manager.yaml" in capsys.readouterr().out
    for directory in ("roles", "playbooks", "config/crd/bases", "config/samples"):
        assert (project / directory).is_dir()
    assert load_watches(project / "watches.yaml", cwd=project) == []
    assert (project / "watches.yaml").read_text().startswith("# watches.yaml")

    assert yaml.safe_load((project / "PROJECT").read_text()) == {
        "domain": "example.com",
        "layout": "ansible-operator/v1",
        "projectName": "memcached-operator",
        "resources": [],
    }
    namespace, deployment = load_yaml(project / "config/manager/manager.yaml")
    assert namespace["metadata"]["name"] == "memcached-operator-system"
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "memcached-operator:latest"
    assert "--leader-elect" in container["args"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert {"containerPort": 6789, "name": "health"} in container["ports"]
    assert container["resources"]["requests"] and container["resources"]["limits"]

    kinds = [d["kind"] for d in load_yaml(project / "config/rbac/leader_election.yaml")]
    assert kinds == ["Role", "RoleBinding"]
    [account] = load_yaml(project / "config/rbac/service_account.yaml")
    assert account["metadata"]["namespace"] == "memcached-operator-system"
    [role] = load_yaml(project / "config/rbac/role.yaml")
    assert role["kind"] == "ClusterRole"
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]}
    ]

    dockerfile = (project / "Dockerfile").read_text()
    assert f"FROM ghcr.io/ansible-operator/ansible-operator:{__version__}\n" in dockerfile
    for copied in ("watches.yaml", "roles/", "playbooks/"):
        assert f"COPY --chown=1001:0 {copied}" in dockerfile
    requirements = yaml.safe_load((project / "requirements.yml").read_text())
    assert [c["name"] for c in requirements["collections"]] == ["kubernetes.core"]
    ast.parse((project / "tests/conftest.py").read_text())


def test_init_refuses_an_existing_project(project: Path, capsys: pytest.CaptureFixture) -> None:
    capsys.readouterr()
    assert init(project) == 2
    assert "already holds a project" in capsys.readouterr().err


def test_init_keeps_existing_files(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "Dockerfile").write_text("FROM mine\n")
    assert init(tmp_path, "--project-name", "mine") == 0
    assert (tmp_path / "Dockerfile").read_text() == "FROM mine\n"
    assert "kept Dockerfile (exists)" in capsys.readouterr().out
    assert yaml.safe_load((tmp_path / "PROJECT").read_text())["projectName"] == "mine"


def test_create_api_without_init_fails(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert create(tmp_path, "Memcached") == 2
    assert "run `ansible-operator init` first" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_create_api_with_a_role(project: Path, capsys: pytest.CaptureFixture) -> None:
    assert create(project, "Memcached") == 0
    out = capsys.readouterr().out
    assert "created roles/memcached/tasks/main.yml" in out
    assert "created tests/test_memcached.py" in out

    [watch] = load_watches(project / "watches.yaml", cwd=project)
    assert (watch.gvk.group, watch.gvk.version, watch.gvk.kind) == (
        "cache.example.com",
        "v1alpha1",
        "Memcached",
    )
    assert watch.role == project / "roles" / "memcached"

    tasks = yaml.safe_load((project / "roles/memcached/tasks/main.yml").read_text())
    assert [next(k for k in task if k != "name") for task in tasks] == [
        "kubernetes.core.k8s",
        "operator_sdk.util.k8s_status",
    ]
    assert tasks[1]["operator_sdk.util.k8s_status"]["kind"] == "Memcached"
    assert yaml.safe_load((project / "roles/memcached/defaults/main.yml").read_text()) == {
        "size": 1
    }
    assert "galaxy_info" in yaml.safe_load((project / "roles/memcached/meta/main.yml").read_text())
    assert (project / "roles/memcached/README.md").read_text().startswith("# memcached")

    [crd] = load_yaml(project / "config/crd/bases/cache.example.com_memcacheds.yaml")
    assert crd["metadata"]["name"] == "memcacheds.cache.example.com"
    assert crd["spec"]["names"]["plural"] == "memcacheds"
    [version] = crd["spec"]["versions"]
    assert version["subresources"] == {"status": {}}
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns["Ready"] == '.status.conditions[?(@.type=="Successful")].status'
    assert set(columns) == {"Ready", "Reason", "Age"}
    schema = version["schema"]["openAPIV3Schema"]["properties"]
    assert schema["spec"]["type"] == "object"
    assert schema["spec"]["x-kubernetes-preserve-unknown-fields"] is True
    status = schema["status"]
    assert status["x-kubernetes-preserve-unknown-fields"] is True
    assert status["properties"]["observedGeneration"]["type"] == "integer"
    condition = status["properties"]["conditions"]["items"]["properties"]
    assert {"type", "status", "reason", "message", "lastTransitionTime"} <= set(condition)

    [sample] = load_yaml(project / "config/samples/cache_v1alpha1_memcached.yaml")
    assert sample["apiVersion"] == "cache.example.com/v1alpha1"
    assert sample["kind"] == "Memcached"

    [role] = load_yaml(project / "config/rbac/role.yaml")
    resources = [r["resources"] for r in role["rules"]]
    assert ["memcacheds", "memcacheds/status", "memcacheds/finalizers"] in resources
    assert ["configmaps"] in resources
    assert "&id" not in (project / "config/rbac/role.yaml").read_text()

    test_source = (project / "tests/test_memcached.py").read_text()
    ast.parse(test_source)
    assert "OperatorProcess(" in test_source
    assert '"Successful"' in test_source

    resources = yaml.safe_load((project / "PROJECT").read_text())["resources"]
    assert [(r["group"], r["version"], r["kind"]) for r in resources] == [
        ("cache", "v1alpha1", "Memcached")
    ]


def test_create_api_with_a_playbook(project: Path) -> None:
    assert create(project, "Policy", group="web", how="playbook") == 0
    [watch] = load_watches(project / "watches.yaml", cwd=project)
    assert watch.playbook == project / "playbooks" / "policy.yml"
    [play] = yaml.safe_load((project / "playbooks/policy.yml").read_text())
    assert play["hosts"] == "localhost"
    assert play["gather_facts"] is False
    assert play["collections"] == ["kubernetes.core", "operator_sdk.util"]
    assert len(play["tasks"]) == 2
    assert (project / "config/crd/bases/web.example.com_policies.yaml").exists()
    assert (project / "config/samples/web_v1alpha1_policy.yaml").exists()
    assert not (project / "roles/policy").exists()


def test_a_second_kind_keeps_the_users_edits(project: Path) -> None:
    assert create(project, "Memcached") == 0
    watches = project / "watches.yaml"
    watches.write_text(watches.read_text() + "  reconcilePeriod: 30s  # mine\n# my note\n")
    tasks = project / "roles/memcached/tasks/main.yml"
    tasks.write_text(tasks.read_text() + "\n- name: Mine\n  ansible.builtin.debug: {}\n")
    edited_watches, edited_tasks = watches.read_text(), tasks.read_text()

    assert create(project, "Backup", how="playbook") == 0

    text = watches.read_text()
    assert text.startswith(edited_watches)
    assert tasks.read_text() == edited_tasks
    first, second = load_watches(watches, cwd=project)
    assert first.reconcile_period == 30
    assert (second.gvk.kind, second.playbook) == ("Backup", project / "playbooks/backup.yml")
    [role] = load_yaml(project / "config/rbac/role.yaml")
    resources = [r["resources"] for r in role["rules"]]
    assert resources.count(["configmaps"]) == 1
    assert ["backups", "backups/status", "backups/finalizers"] in resources
    kinds = [r["kind"] for r in yaml.safe_load((project / "PROJECT").read_text())["resources"]]
    assert kinds == ["Memcached", "Backup"]


def test_a_duplicate_kind_is_refused(project: Path, capsys: pytest.CaptureFixture) -> None:
    assert create(project, "Memcached") == 0
    before = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    capsys.readouterr()

    assert create(project, "Memcached", how="playbook") == 2

    assert "cache.example.com/v1alpha1 Memcached is already in" in capsys.readouterr().err
    after = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    assert after == before


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--kind", "memcached", "CamelCase"),
        ("--group", "Cache", "DNS label"),
        ("--version", "1", "v1beta1"),
    ],
)
def test_bad_names_are_refused(
    project: Path, capsys: pytest.CaptureFixture, flag: str, value: str, message: str
) -> None:
    values = {"--group": "cache", "--version": "v1", "--kind": "Memcached", flag: value}
    argv = ["create", "api", "--generate-role", "--dir", str(project)]
    for name, given in values.items():
        argv += [name, given]
    assert main(argv) == 2
    assert message in capsys.readouterr().err
