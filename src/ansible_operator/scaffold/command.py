"""`ansible-operator init` and `ansible-operator create api`."""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
import textwrap
from pathlib import Path
from string import Template
from typing import Any

import yaml

from ansible_operator import __version__
from ansible_operator.scaffold import plural_of, snake_name
from ansible_operator.scaffold import templates as t
from ansible_operator.scaffold.yaml_edit import YamlEditError, append_to_list
from ansible_operator.values.rbac_rules import granted, is_cluster_role

LAYOUT = "ansible-operator/v1"
PROJECT_FILE = "PROJECT"
ROLE_FILE = Path("config/rbac/role.yaml")
CRD_KUSTOMIZATION = "config/crd/kustomization.yaml"
SAMPLES_KUSTOMIZATION = "config/samples/kustomization.yaml"

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_KIND = re.compile(r"^[A-Z][A-Za-z0-9]*$")
_VERSION = re.compile(r"^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$")

CRUD = ["create", "delete", "get", "list", "patch", "update", "watch"]


class ScaffoldError(Exception):
    """A scaffolding request that cannot be done; the message says why."""


def add_init_arguments(init: argparse.ArgumentParser) -> None:
    init.add_argument("--domain", required=True, help="API group domain, e.g. example.com")
    init.add_argument("--project-name", help="name of the project (default: the directory's name)")
    init.add_argument("--dir", type=Path, default=Path(), help="project directory (default: .)")


def add_create_arguments(create: argparse.ArgumentParser) -> None:
    kinds = create.add_subparsers(dest="what", metavar="WHAT", required=True)
    api = kinds.add_parser(
        "api", help="a new kind: CRD, sample, watches.yaml entry, role or playbook, RBAC, test"
    )
    api.add_argument("--group", required=True, help="API group, without the domain (e.g. cache)")
    api.add_argument("--version", required=True, help="API version, e.g. v1alpha1")
    api.add_argument("--kind", required=True, help="kind, in CamelCase (e.g. Memcached)")
    how = api.add_mutually_exclusive_group(required=True)
    how.add_argument(
        "--generate-role", action="store_true", help="reconcile with a role in roles/<kind>"
    )
    how.add_argument(
        "--generate-playbook",
        action="store_true",
        help="reconcile with a playbook playbooks/<kind>.yml",
    )
    api.add_argument("--dir", type=Path, default=Path(), help="project directory (default: .)")


def _fail(error: ScaffoldError) -> int:
    print(f"ansible-operator: {error}", file=sys.stderr)
    return 2


def init_command(args: argparse.Namespace) -> int:
    try:
        init_project(args.dir, domain=args.domain, project_name=args.project_name)
    except ScaffoldError as error:
        return _fail(error)
    return 0


def create_api_command(args: argparse.Namespace) -> int:
    try:
        create_api(
            args.dir,
            group=args.group,
            version=args.version,
            kind=args.kind,
            playbook=args.generate_playbook,
        )
    except ScaffoldError as error:
        return _fail(error)
    return 0


# -- writing files ----------------------------------------------------------------------


class _Writer:
    """Writes files under `root`, never over an existing one, and reports each."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def write(self, relative: str | Path, text: str) -> bool:
        path = self.root / relative
        if path.exists():
            print(f"kept {relative} (exists)")
            return False
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"created {relative}")
        return True

    def update(self, relative: str | Path, text: str) -> None:
        path = self.root / relative
        existed = path.exists()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"{'updated' if existed else 'created'} {relative}")


def _render(template: str, **values: Any) -> str:
    return Template(template).substitute(values)


class _MakeTemplate(Template):
    """`@@{name}` placeholders: a Makefile is full of `$`."""

    delimiter = "@@"


# -- init -------------------------------------------------------------------------------


def default_project_name(directory: Path) -> str:
    name = re.sub(r"[^a-z0-9-]+", "-", directory.resolve().name.lower()).strip("-")
    return name or "operator"


def init_project(directory: Path, *, domain: str, project_name: str | None = None) -> None:
    directory = Path(directory)
    if (directory / PROJECT_FILE).exists():
        raise ScaffoldError(
            f"{directory / PROJECT_FILE} exists: {directory} already holds a project "
            "(use `ansible-operator create api` to add kinds)"
        )
    if not _DNS_SUBDOMAIN.match(domain):
        raise ScaffoldError(f"--domain {domain!r} is not a DNS name (e.g. example.com)")
    name = project_name or default_project_name(directory)
    if not _DNS_LABEL.match(name) or len(name) > 48:
        raise ScaffoldError(
            f"project name {name!r} must be lower-case letters, digits and '-' "
            "(at most 48); pass --project-name"
        )
    values = {"project": name, "domain": domain, "tool_version": __version__}
    out = _Writer(directory)
    out.write(PROJECT_FILE, _render(t.PROJECT, **values))
    out.write("watches.yaml", t.WATCHES)
    out.write("roles/.placeholder", t.PLACEHOLDER)
    out.write("playbooks/.placeholder", t.PLACEHOLDER)
    out.write(CRD_KUSTOMIZATION, t.CRD_KUSTOMIZATION)
    out.write(SAMPLES_KUSTOMIZATION, t.SAMPLES_KUSTOMIZATION)
    out.write("config/rbac/kustomization.yaml", t.RBAC_KUSTOMIZATION)
    out.write("config/rbac/service_account.yaml", _render(t.SERVICE_ACCOUNT, **values))
    out.write("config/rbac/leader_election.yaml", _render(t.LEADER_ELECTION, **values))
    out.write(ROLE_FILE, _render(t.ROLE, **values))
    out.write("config/rbac/role_binding.yaml", _render(t.ROLE_BINDING, **values))
    out.write("config/rbac/metrics_auth.yaml", _render(t.METRICS_AUTH, **values))
    out.write("config/manager/kustomization.yaml", t.MANAGER_KUSTOMIZATION)
    out.write("config/manager/manager.yaml", _render(t.MANAGER, **values))
    out.write("config/default/kustomization.yaml", t.DEFAULT_KUSTOMIZATION)
    out.write("config/sharding/kustomization.yaml", _render(t.SHARDING_KUSTOMIZATION, **values))
    out.write("config/prometheus/kustomization.yaml", t.PROMETHEUS_KUSTOMIZATION)
    out.write("config/prometheus/monitor.yaml", _render(t.PROMETHEUS_MONITOR, **values))
    out.write("config/network-policy/kustomization.yaml", t.NETWORK_POLICY_KUSTOMIZATION)
    out.write(
        "config/network-policy/allow-metrics-traffic.yaml",
        _render(t.NETWORK_POLICY_METRICS, **values),
    )
    out.write("Dockerfile", _render(t.DOCKERFILE, **values))
    out.write(".dockerignore", t.DOCKERIGNORE)
    out.write("Makefile", _MakeTemplate(t.MAKEFILE).substitute(values))
    out.write("requirements.yml", t.REQUIREMENTS)
    out.write("pytest.ini", t.PYTEST_INI)
    out.write("tests/conftest.py", t.TESTS_CONFTEST)
    out.write(".gitignore", t.GITIGNORE)
    print(
        f"next: ansible-operator create api --group GROUP --version v1alpha1 --kind KIND "
        f"--generate-role --dir {directory}"
    )


# -- create api -------------------------------------------------------------------------


def _load_project(directory: Path) -> tuple[str, dict[str, Any]]:
    path = directory / PROJECT_FILE
    if not path.exists():
        raise ScaffoldError(
            f"no {PROJECT_FILE} file in {directory}: run `ansible-operator init` first"
        )
    text = path.read_text(encoding="utf-8")
    try:
        project = yaml.safe_load(text) or {}
    except yaml.YAMLError as error:
        raise ScaffoldError(f"{path} is not valid YAML: {error}") from None
    if not isinstance(project, dict) or not project.get("domain"):
        raise ScaffoldError(f"{path} has no domain; is it an ansible-operator project?")
    return text, project


def create_api(
    directory: Path, *, group: str, version: str, kind: str, playbook: bool = False
) -> None:
    """Add `kind` to the project: new files are written, the files it edits
    (watches.yaml, RBAC role, kustomizations, PROJECT) keep their comments.
    Every edit is worked out before anything is written."""
    directory = Path(directory)
    project_text, project = _load_project(directory)
    domain = str(project["domain"])
    if not _DNS_LABEL.match(group):
        raise ScaffoldError(f"--group {group!r} must be a lower-case DNS label (e.g. cache)")
    if not _VERSION.match(version):
        raise ScaffoldError(f"--version {version!r} must look like v1, v1beta1 or v1alpha2")
    if not _KIND.match(kind):
        raise ScaffoldError(
            f"--kind {kind!r} must be CamelCase letters and digits (e.g. Memcached)"
        )
    full_group = f"{group}.{domain}"
    name = snake_name(kind)
    plural = plural_of(kind)
    _check_not_watched(directory, full_group, version, kind)
    watched = [found for found in _watched(directory) if _same_kind(found, full_group, kind)]
    if watched:
        add_version(directory, project_text, project, group, version, kind, hub=watched[0][1])
        return

    project_name = str(project.get("projectName") or default_project_name(directory))
    values = {
        "project": project_name,
        "group": full_group,
        "short_group": group,
        "version": version,
        "kind": kind,
        "name": name,
        "plural": plural,
        "var_name": re.sub(r"[.-]", "_", f"{full_group}_{name}"),
    }
    crd_file = f"{full_group}_{plural}.yaml"
    sample_file = f"{group}_{version}_{name}.yaml"
    reconciler = f"playbooks/{name}.yml" if playbook else f"roles/{name}"
    watch: dict[str, Any] = {"version": version, "group": full_group, "kind": kind}
    watch.update({"playbook": reconciler} if playbook else {"role": name})
    resource = {
        "domain": domain,
        "group": group,
        "version": version,
        "kind": kind,
        "plural": plural,
        "reconciler": reconciler,
    }
    about = f"{kind} ({full_group}/{version})"

    edits = {
        Path("watches.yaml"): _edit(directory, "watches.yaml", watch, key=None),
        ROLE_FILE: _rbac_edit(directory, project_name, full_group, plural, about),
        Path(CRD_KUSTOMIZATION): _kustomization_edit(
            directory, CRD_KUSTOMIZATION, t.CRD_KUSTOMIZATION, f"bases/{crd_file}"
        ),
        Path(SAMPLES_KUSTOMIZATION): _kustomization_edit(
            directory, SAMPLES_KUSTOMIZATION, t.SAMPLES_KUSTOMIZATION, sample_file
        ),
        Path(PROJECT_FILE): _append(PROJECT_FILE, project_text, resource, key="resources"),
    }

    out = _Writer(directory)
    tasks = _render(t.TASKS, **values)
    if playbook:
        out.write(
            f"playbooks/{name}.yml",
            _render(t.PLAYBOOK_HEADER, **values) + textwrap.indent(tasks, "    "),
        )
    else:
        out.write(f"roles/{name}/tasks/main.yml", _render(t.ROLE_TASKS_HEADER, **values) + tasks)
        out.write(f"roles/{name}/defaults/main.yml", _render(t.ROLE_DEFAULTS, **values))
        out.write(f"roles/{name}/meta/main.yml", _render(t.ROLE_META, **values))
        out.write(f"roles/{name}/README.md", _render(t.ROLE_README, **values))
    out.write(f"config/crd/bases/{crd_file}", _render(t.CRD, **values))
    out.write(f"config/samples/{sample_file}", _render(t.SAMPLE, **values))
    out.write(f"tests/test_{name}.py", _render(t.TEST, **values))
    for relative, text in edits.items():
        if text is not None:
            out.update(relative, text)


def _same_kind(found: tuple[str, str, str], group: str, kind: str) -> bool:
    return found[0] == group and found[2].lower() == kind.lower()


# -- a second version of a kind ---------------------------------------------------------

WEBHOOK_SERVICE_FILE = "config/webhook/service.yaml"
WEBHOOK_KUSTOMIZATION = "config/webhook/kustomization.yaml"
WEBHOOK_RBAC_FILE = "config/rbac/webhook.yaml"
DEFAULT_KUSTOMIZATION = "config/default/kustomization.yaml"
RBAC_KUSTOMIZATION = "config/rbac/kustomization.yaml"


def add_version(
    directory: Path,
    project_text: str,
    project: dict[str, Any],
    group: str,
    version: str,
    kind: str,
    *,
    hub: str,
) -> None:
    """`version` added to a kind the project watches at `hub`: the CRD gains it (served,
    not stored, the hub's schema to start from) and the conversion stanza that calls the
    operator's webhook Service; watches.yaml a `- conversion:` entry with a fieldMap to
    edit; a sample; and, once per project, the Service (config/webhook/), the Secret the
    CA is kept in (RBAC), and the rule to keep the CRD's stanza."""
    domain = str(project["domain"])
    full_group = f"{group}.{domain}"
    name = snake_name(kind)
    plural = plural_of(kind)
    project_name = str(project.get("projectName") or default_project_name(directory))
    crd_file = Path("config/crd/bases") / f"{full_group}_{plural}.yaml"
    crd_path = directory / crd_file
    if not crd_path.exists():
        raise ScaffoldError(
            f"{kind} is watched at {hub} but {crd_file} is missing; nothing written"
        )
    crd_text = crd_path.read_text(encoding="utf-8")
    try:
        crd = yaml.safe_load(crd_text)
        versions = crd["spec"]["versions"]
        base = next(v for v in versions if v.get("name") == hub)
    except (yaml.YAMLError, KeyError, TypeError, StopIteration):
        raise ScaffoldError(
            f"{crd_file} is no CRD with version {hub}; add {version} to it yourself"
        ) from None
    if any(v.get("name") == version for v in versions):
        raise ScaffoldError(f"{crd_file} already has version {version}; nothing written")
    if _converted(directory, full_group, kind):
        raise ScaffoldError(
            f"watches.yaml already converts {kind}: add `- version: {version}` with its "
            "fieldMap to that entry's versions, and the version to "
            f"{crd_file} (served: true, storage: false); nothing written"
        )
    values = {
        "project": project_name,
        "group": full_group,
        "short_group": group,
        "version": version,
        "hub": hub,
        "kind": kind,
        "name": name,
        "name_lower": kind.lower(),
        "plural": plural,
    }
    new_version = {**copy.deepcopy(base), "name": version, "served": True, "storage": False}
    versions.append(new_version)
    crd["spec"]["conversion"] = json.loads(
        Template(json.dumps(t.CONVERSION_STANZA)).substitute(values)
    )
    leading = "".join(
        line for line in crd_text.splitlines(keepends=True)[:50] if line.startswith("#")
    )
    new_crd = (
        leading
        + _render(t.CRD_CONVERSION_COMMENT, **values)
        + yaml.safe_dump(crd, sort_keys=False, width=96)
    )
    conversion = {
        "conversion": {
            "group": full_group,
            "kind": kind,
            "hub": hub,
            "versions": [
                {"version": version, "fieldMap": [{"hub": "spec.size", "spoke": "spec.size"}]}
            ],
        }
    }
    comment = textwrap.fill(_render(t.CONVERSION_COMMENT, **values), width=86)
    sample_file = f"{group}_{version}_{name}.yaml"
    resource = {
        "domain": domain,
        "group": group,
        "version": version,
        "kind": kind,
        "plural": plural,
        "conversion": {"hub": hub},
    }
    crd_name = f"{plural}.{full_group}"
    edits: dict[Path, str | None] = {
        Path("watches.yaml"): _edit(
            directory, "watches.yaml", conversion, key=None, comment=comment
        ),
        crd_file: new_crd,
        Path(SAMPLES_KUSTOMIZATION): _kustomization_edit(
            directory, SAMPLES_KUSTOMIZATION, t.SAMPLES_KUSTOMIZATION, sample_file
        ),
        Path(PROJECT_FILE): _append(PROJECT_FILE, project_text, resource, key="resources"),
        Path(DEFAULT_KUSTOMIZATION): _kustomization_edit(
            directory, DEFAULT_KUSTOMIZATION, t.DEFAULT_KUSTOMIZATION, "../webhook"
        ),
        Path(RBAC_KUSTOMIZATION): _kustomization_edit(
            directory, RBAC_KUSTOMIZATION, t.RBAC_KUSTOMIZATION, "webhook.yaml"
        ),
        ROLE_FILE: _crd_rbac_edit(directory, project_name, crd_name, f"{kind} conversions"),
    }
    out = _Writer(directory)
    out.write(WEBHOOK_SERVICE_FILE, _render(t.WEBHOOK_SERVICE, **values))
    out.write(WEBHOOK_KUSTOMIZATION, t.WEBHOOK_KUSTOMIZATION)
    out.write(WEBHOOK_RBAC_FILE, _render(t.WEBHOOK_RBAC, **values))
    out.write(f"config/samples/{sample_file}", _render(t.SAMPLE, **values))
    for relative, text in edits.items():
        if text is not None:
            out.update(relative, text)
    print(
        f"next: edit the fieldMap of {kind} {version} in watches.yaml and {version}'s schema "
        f"in {crd_file}; `ansible-operator check` tells what the API server could not convert"
    )


def _converted(directory: Path, group: str, kind: str) -> bool:
    try:
        entries = yaml.safe_load((directory / "watches.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return False
    return any(
        isinstance(entry, dict)
        and isinstance(entry.get("conversion"), dict)
        and entry["conversion"].get("group") == group
        and str(entry["conversion"].get("kind", "")).lower() == kind.lower()
        for entry in entries or []
    )


def _crd_rbac_edit(directory: Path, project: str, crd_name: str, about: str) -> str | None:
    """The rule to follow and patch one CRD (its conversion stanza), appended."""
    path = directory / ROLE_FILE
    text = path.read_text(encoding="utf-8") if path.exists() else _render(t.ROLE, project=project)
    try:
        role = next((d for d in yaml.safe_load_all(text) if is_cluster_role(d)), None)
    except yaml.YAMLError as error:
        raise ScaffoldError(f"{path} is not valid YAML: {error}") from None
    if role is None:
        print(
            f"warning: no ClusterRole in {ROLE_FILE}; let it get, list, watch and patch {crd_name}"
        )
        return None
    for rule in role.get("rules") or []:
        if (
            "apiextensions.k8s.io" in (rule.get("apiGroups") or [])
            and "customresourcedefinitions" in (rule.get("resources") or [])
            and crd_name in (rule.get("resourceNames") or [crd_name])
            and {"get", "list", "watch", "patch"} <= set(rule.get("verbs") or [])
        ):
            return None
    rule = {
        "apiGroups": ["apiextensions.k8s.io"],
        "resources": ["customresourcedefinitions"],
        "resourceNames": [crd_name],
        "verbs": ["get", "list", "watch", "patch"],
    }
    return _append(ROLE_FILE, text, rule, key="rules", document=is_cluster_role, comment=about)


def _append(label: str | Path, text: str, item: Any, **where: Any) -> str:
    try:
        return append_to_list(text, item, **where)
    except YamlEditError as error:
        raise ScaffoldError(f"{label}: cannot add {item!r}: {error}; nothing written") from None


def _edit(directory: Path, relative: str, item: Any, **where: Any) -> str:
    path = directory / relative
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    return _append(relative, text, item, **where)


def _watched(directory: Path) -> list[tuple[str, str, str]]:
    path = directory / "watches.yaml"
    if not path.exists():
        return []
    try:
        entries = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise ScaffoldError(f"{path} is not valid YAML, fix it first: {error}") from None
    found = []
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict):
            fields = {str(k).lower(): str(v if v is not None else "") for k, v in entry.items()}
            found.append(
                (fields.get("group", ""), fields.get("version", ""), fields.get("kind", ""))
            )
    return found


def _check_not_watched(directory: Path, group: str, version: str, kind: str) -> None:
    for found in _watched(directory):
        if found[0] == group and found[1] == version and found[2].lower() == kind.lower():
            raise ScaffoldError(
                f"{group}/{version} {kind} is already in {directory / 'watches.yaml'}; "
                "nothing written"
            )


def _kustomization_edit(directory: Path, relative: str, template: str, entry: str) -> str | None:
    """`entry` appended to the kustomization's resources (a missing kustomization
    is written, listing what the folder already holds)."""
    path = directory / relative
    if path.exists():
        text = path.read_text(encoding="utf-8")
    else:
        text = template
        folder = path.parent / Path(entry).parent
        for existing in sorted(folder.glob("*.yaml")):
            listed = str(existing.relative_to(path.parent))
            if listed != entry and existing.name != "kustomization.yaml":
                text = _append(relative, text, listed, key="resources")
    try:
        listed = (yaml.safe_load(text) or {}).get("resources") or []
    except (yaml.YAMLError, AttributeError):
        raise ScaffoldError(f"{path} is not a kustomization (a YAML mapping)") from None
    if entry in listed:
        return None
    return _append(relative, text, entry, key="resources")


# -- RBAC -------------------------------------------------------------------------------


def _missing_rules(rules: list[Any], wanted: list[dict[str, Any]]) -> list[dict[str, Any]]:
    missing = []
    for rule in wanted:
        verbs = [
            verb
            for verb in rule["verbs"]
            if not all(
                granted(rules, group, resource, verb)
                for group in rule["apiGroups"]
                for resource in rule["resources"]
            )
        ]
        if verbs:
            missing.append({**rule, "verbs": verbs})
    return missing


def _rbac_edit(directory: Path, project: str, group: str, plural: str, about: str) -> str | None:
    """The ClusterRole with the rules the new kind needs appended (as new rules:
    existing ones are never rewritten, so their comments and layout stay)."""
    path = directory / ROLE_FILE
    text = path.read_text(encoding="utf-8") if path.exists() else _render(t.ROLE, project=project)
    try:
        role = next((d for d in yaml.safe_load_all(text) if is_cluster_role(d)), None)
    except yaml.YAMLError as error:
        raise ScaffoldError(f"{path} is not valid YAML: {error}") from None
    if role is None:
        print(f"warning: no ClusterRole in {ROLE_FILE}; add rules for {plural}.{group} yourself")
        return None
    wanted = [
        {
            "apiGroups": [group],
            "resources": [plural, f"{plural}/status", f"{plural}/finalizers"],
            "verbs": list(CRUD),
        },
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": list(CRUD)},
    ]
    rules = list(role.get("rules") or [])
    missing = _missing_rules(rules, wanted)
    if not missing and path.exists():
        return None
    comment: str | None = about
    for rule in missing:
        text = _append(
            ROLE_FILE, text, rule, key="rules", document=is_cluster_role, comment=comment
        )
        comment = None
    return text
