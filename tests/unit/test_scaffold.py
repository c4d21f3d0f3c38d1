"""`ansible-operator init` and `create api`: the files they write, without a cluster."""

from __future__ import annotations

import ast
import configparser
from pathlib import Path

import pytest
import yaml

from ansible_operator import __version__
from ansible_operator.cli import main
from ansible_operator.project.watches import load_watches, load_watches_file
from ansible_operator.scaffold import plural_of


def init(project: Path, *extra: str) -> int:
    return main(["init", "--domain", "example.com", "--dir", str(project), *extra])


def create(
    project: Path, kind: str, *, group: str = "cache", how: str = "role", version: str = "v1alpha1"
) -> int:
    return main(
        [
            "create",
            "api",
            "--group",
            group,
            "--version",
            version,
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
    for placeholder in ("roles/.placeholder", "playbooks/.placeholder"):
        assert (project / placeholder).is_file()
    assert load_watches(project / "watches.yaml", cwd=project) == []
    assert (project / "watches.yaml").read_text().startswith("# watches.yaml")

    assert yaml.safe_load((project / "PROJECT").read_text()) == {
        "domain": "example.com",
        "layout": "ansible-operator/v1",
        "projectName": "memcached-operator",
        "resources": [],
    }
    namespace, deployment, metrics = load_yaml(project / "config/manager/manager.yaml")
    assert namespace["metadata"]["name"] == "memcached-operator-system"
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "memcached-operator:latest"
    assert container["imagePullPolicy"] == "IfNotPresent"  # loaded into the node, not pulled
    assert "--leader-elect" in container["args"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert {"containerPort": 6789, "name": "health"} in container["ports"]
    assert container["resources"]["requests"] and container["resources"]["limits"]
    # The metrics Service the ServiceMonitor finds, on the port the container serves.
    assert {"containerPort": 8443, "name": "metrics"} in container["ports"]
    assert metrics["kind"] == "Service"
    assert metrics["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert metrics["spec"]["ports"] == [{"name": "metrics", "port": 8443, "targetPort": "metrics"}]
    [monitor] = load_yaml(project / "config/prometheus/monitor.yaml")
    assert monitor["kind"] == "ServiceMonitor"
    assert monitor["spec"]["selector"]["matchLabels"] == metrics["metadata"]["labels"]
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    [policy] = load_yaml(project / "config/network-policy/allow-metrics-traffic.yaml")
    assert policy["kind"] == "NetworkPolicy"
    assert policy["metadata"]["namespace"] == "memcached-operator-system"
    assert policy["spec"]["podSelector"] == deployment["spec"]["selector"]
    assert policy["spec"]["ingress"][0]["ports"] == [{"port": 8443, "protocol": "TCP"}]

    kinds = [d["kind"] for d in load_yaml(project / "config/rbac/leader_election.yaml")]
    assert kinds == ["Role", "RoleBinding"]
    # Metrics over HTTPS to authorised scrapers only, as controller-runtime serves them.
    assert "--metrics-secure" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    auth = load_yaml(project / "config/rbac/metrics_auth.yaml")
    assert [d["kind"] for d in auth] == ["ClusterRole", "ClusterRoleBinding", "ClusterRole"]
    assert auth[1]["subjects"] == [
        {
            "kind": "ServiceAccount",
            "name": "memcached-operator-controller-manager",
            "namespace": "memcached-operator-system",
        }
    ]
    assert monitor["spec"]["endpoints"][0]["scheme"] == "https"
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
    for kustomization, resources in {
        "crd": [],
        "samples": [],
        "rbac": [
            "service_account.yaml",
            "role.yaml",
            "role_binding.yaml",
            "leader_election.yaml",
            "metrics_auth.yaml",
        ],
        "manager": ["manager.yaml"],
        "default": ["../crd", "../rbac", "../manager"],  # the two below commented out
        "sharding": ["../default"],  # patched into a shard ring of three replicas
        "prometheus": ["monitor.yaml"],
        "network-policy": ["allow-metrics-traffic.yaml"],
    }.items():
        [data] = load_yaml(project / "config" / kustomization / "kustomization.yaml")
        assert data["kind"] == "Kustomization"
        assert data["resources"] == resources
    ignored = (project / ".dockerignore").read_text().split()
    assert {".git/", ".venv/", "**/__pycache__/"} <= set(ignored)
    requirements = yaml.safe_load((project / "requirements.yml").read_text())
    assert [c["name"] for c in requirements["collections"]] == ["kubernetes.core"]
    ast.parse((project / "tests/conftest.py").read_text())
    pytest_ini = configparser.ConfigParser()
    pytest_ini.read(project / "pytest.ini")
    assert pytest_ini["pytest"]["asyncio_default_fixture_loop_scope"] == "function"


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


def test_a_second_version_of_a_kind_is_converted_through_the_watched_one(
    project: Path, capsys: pytest.CaptureFixture
) -> None:
    assert create(project, "Memcached") == 0
    assert create(project, "Memcached", version="v1beta1") == 0
    output = capsys.readouterr().out
    assert "next: edit the fieldMap of Memcached v1beta1 in watches.yaml" in output

    loaded = load_watches_file(project / "watches.yaml", env={}, cwd=project)
    [watch] = loaded.watches
    assert watch.gvk.version == "v1alpha1"  # the role still reads the hub
    [conversion] = loaded.conversions
    assert (conversion.kind, conversion.hub) == ("Memcached", "v1alpha1")
    [v1beta1] = conversion.versions
    assert v1beta1.version == "v1beta1" and v1beta1.field_map is not None
    [crd] = load_yaml(project / "config/crd/bases/cache.example.com_memcacheds.yaml")
    assert [(v["name"], v["served"], v["storage"]) for v in crd["spec"]["versions"]] == [
        ("v1alpha1", True, True),
        ("v1beta1", True, False),
    ]
    service = crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"]
    assert service == {
        "namespace": "memcached-operator-system",
        "name": "memcached-operator-webhook-service",
        "path": "/convert/memcached.cache.example.com",
        "port": 443,
    }
    [svc] = load_yaml(project / "config/webhook/service.yaml")
    assert svc["metadata"]["name"] == service["name"]
    assert "../webhook" in load_yaml(project / "config/default/kustomization.yaml")[0]["resources"]
    assert "webhook.yaml" in load_yaml(project / "config/rbac/kustomization.yaml")[0]["resources"]
    [role] = load_yaml(project / "config/rbac/role.yaml")
    assert {
        "apiGroups": ["apiextensions.k8s.io"],
        "resources": ["customresourcedefinitions"],
        "resourceNames": ["memcacheds.cache.example.com"],
        "verbs": ["get", "list", "watch", "patch"],
    } in role["rules"]
    [sample] = load_yaml(project / "config/samples/cache_v1beta1_memcached.yaml")
    assert sample["apiVersion"] == "cache.example.com/v1beta1"

    # A third: the entry exists, the user adds to it (nothing is half written).
    before = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    assert create(project, "Memcached", version="v1") == 2
    assert "watches.yaml already converts Memcached" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in project.rglob("*") if p.is_file()} == before


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


# -- create api keeps what people wrote -------------------------------------------------

COMMENTED_WATCHES = """\
# Our operator's kinds.
- version: v1alpha1  # first API
  group: cache.example.com
  kind: Memcached
  # tuned for the big cluster
  reconcilePeriod: 30s
  role: memcached
# more kinds go below
"""

SDK_ROLE = """\
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: manager-role
rules:
  ##
  ## Base operator rules
  ##
  - apiGroups:
      - ""
    resources:
      - secrets
      - pods
    verbs: ["*"]  # everything
  - apiGroups: [""]
    resources: [configmaps]
    verbs: [create, get, list, watch]
#+kubebuilder:scaffold:rules
"""

COMMENTED_KUSTOMIZATION = """\
# CRDs we ship
resources:
  - bases/cache.example.com_memcacheds.yaml  # the first one
# a patch of ours
patches: []
"""


def comments(text: str) -> list[str]:
    return [line.split("#", 1)[1] for line in text.splitlines() if "#" in line]


def kept_in_order(old: list[str], new: list[str]) -> bool:
    remaining = iter(new)
    return all(any(found == wanted for found in remaining) for wanted in old)


def test_create_api_keeps_the_comments_of_the_files_it_edits(project: Path) -> None:
    assert create(project, "Memcached") == 0
    edited = {
        project / "watches.yaml": COMMENTED_WATCHES,
        project / "config/rbac/role.yaml": SDK_ROLE,
        project / "config/crd/kustomization.yaml": COMMENTED_KUSTOMIZATION,
    }
    for path, text in edited.items():
        path.write_text(text)
    project_file = project / "PROJECT"
    project_file.write_text(project_file.read_text() + "# kinds we own\n")

    assert create(project, "Backup", group="data") == 0

    for path, text in edited.items():
        assert kept_in_order(comments(text), comments(path.read_text())), path.name
    assert project_file.read_text().count("# kinds we own") == 1

    first, second = load_watches(project / "watches.yaml", cwd=project)
    assert (first.gvk.kind, first.reconcile_period) == ("Memcached", 30)
    assert (second.gvk.group, second.gvk.kind) == ("data.example.com", "Backup")

    [role] = load_yaml(project / "config/rbac/role.yaml")
    assert role["rules"][:2] == yaml.safe_load(SDK_ROLE)["rules"]
    # only what the existing rules do not grant: configmaps lacked delete, patch, update
    assert role["rules"][2:] == [
        {
            "apiGroups": ["data.example.com"],
            "resources": ["backups", "backups/status", "backups/finalizers"],
            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
        },
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["delete", "patch", "update"]},
    ]
    text = (project / "config/rbac/role.yaml").read_text()
    assert text.index("# Backup (data.example.com/v1alpha1)") < text.index("resources: [backups")
    assert text.rstrip().endswith("#+kubebuilder:scaffold:rules")

    kustomization = yaml.safe_load((project / "config/crd/kustomization.yaml").read_text())
    assert kustomization["resources"] == [
        "bases/cache.example.com_memcacheds.yaml",
        "bases/data.example.com_backups.yaml",
    ]
    assert kustomization["patches"] == []
    kinds = [r["kind"] for r in yaml.safe_load(project_file.read_text())["resources"]]
    assert kinds == ["Memcached", "Backup"]


def test_rules_the_role_already_grants_are_not_added_again(project: Path) -> None:
    assert create(project, "Memcached") == 0
    role_file = project / "config/rbac/role.yaml"
    everything = "  # all of it\n  - apiGroups: ['*']\n    resources: ['*']\n    verbs: ['*']\n"
    role_file.write_text(role_file.read_text() + everything)
    before = role_file.read_text()

    assert create(project, "Backup", how="playbook") == 0

    assert role_file.read_text() == before


def test_an_edit_that_cannot_be_made_as_text_changes_nothing(
    project: Path, capsys: pytest.CaptureFixture
) -> None:
    (project / "watches.yaml").write_text("[{version: v1, group: a.b, kind: A, role: a}]\n")
    before = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    capsys.readouterr()

    assert create(project, "Memcached") == 2

    assert "watches.yaml: cannot add" in capsys.readouterr().err
    after = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    assert after == before
