"""`ansible-operator init` and `ansible-operator create api`."""

from __future__ import annotations

import argparse
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

LAYOUT = "ansible-operator/v1"
PROJECT_FILE = "PROJECT"
ROLE_FILE = Path("config/rbac/role.yaml")

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_KIND = re.compile(r"^[A-Z][A-Za-z0-9]*$")
_VERSION = re.compile(r"^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$")

CRUD = ["create", "delete", "get", "list", "patch", "update", "watch"]


class ScaffoldError(Exception):
    """A scaffolding request that cannot be done; the message says why."""


def add_scaffold_commands(commands: argparse._SubParsersAction) -> None:
    """Register `init` and `create api` on the CLI's subcommands."""
    init = commands.add_parser(
        "init", help="write a new operator project (watches.yaml, roles/, config/, tests/)"
    )
    init.add_argument("--domain", required=True, help="API group domain, e.g. example.com")
    init.add_argument("--project-name", help="name of the project (default: the directory's name)")
    init.add_argument("--dir", type=Path, default=Path(), help="project directory (default: .)")
    init.set_defaults(func=init_command)

    create = commands.add_parser("create", help="add to the project in --dir")
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
    api.set_defaults(func=create_api_command)


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

    def mkdir(self, relative: str) -> None:
        path = self.root / relative
        if not path.is_dir():
            path.mkdir(parents=True)
            print(f"created {relative}/")


def _render(template: str, **values: Any) -> str:
    return Template(template).substitute(values)


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
    out.write(
        PROJECT_FILE,
        t.PROJECT_HEADER
        + yaml.safe_dump(
            {"domain": domain, "layout": LAYOUT, "projectName": name, "resources": []},
            sort_keys=False,
        ),
    )
    out.write("watches.yaml", t.WATCHES)
    out.mkdir("roles")
    out.mkdir("playbooks")
    out.mkdir("config/crd/bases")
    out.mkdir("config/samples")
    out.write("config/rbac/service_account.yaml", _render(t.SERVICE_ACCOUNT, **values))
    out.write("config/rbac/leader_election.yaml", _render(t.LEADER_ELECTION, **values))
    out.write(ROLE_FILE, _role_text(_initial_cluster_role(name)))
    out.write("config/rbac/role_binding.yaml", _render(t.ROLE_BINDING, **values))
    out.write("config/manager/manager.yaml", _render(t.MANAGER, **values))
    out.write("Dockerfile", _render(t.DOCKERFILE, **values))
    out.write("requirements.yml", t.REQUIREMENTS)
    out.write("tests/conftest.py", t.TESTS_CONFTEST)
    out.write(".gitignore", t.GITIGNORE)
    print(
        f"next: ansible-operator create api --group GROUP --version v1alpha1 --kind KIND "
        f"--generate-role --dir {directory}"
    )


def _initial_cluster_role(project: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": f"{project}-manager-role"},
        "rules": [{"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]}],
    }


class _NoAliasDumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True


def _role_text(*docs: dict[str, Any]) -> str:
    return t.ROLE_HEADER + yaml.dump_all(docs, Dumper=_NoAliasDumper, sort_keys=False)


# -- create api -------------------------------------------------------------------------


def _load_project(directory: Path) -> dict[str, Any]:
    path = directory / PROJECT_FILE
    if not path.exists():
        raise ScaffoldError(
            f"no {PROJECT_FILE} file in {directory}: run `ansible-operator init` first"
        )
    try:
        project = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as error:
        raise ScaffoldError(f"{path} is not valid YAML: {error}") from None
    if not isinstance(project, dict) or not project.get("domain"):
        raise ScaffoldError(f"{path} has no domain; is it an ansible-operator project?")
    if not isinstance(project.get("resources"), list):
        project["resources"] = []
    return project


def create_api(
    directory: Path, *, group: str, version: str, kind: str, playbook: bool = False
) -> None:
    directory = Path(directory)
    project = _load_project(directory)
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
    out = _Writer(directory)
    tasks = _render(t.TASKS, **values)
    if playbook:
        out.write(
            f"playbooks/{name}.yml",
            _render(t.PLAYBOOK_HEADER, **values) + textwrap.indent(tasks, "    "),
        )
        entry = _render(t.WATCH_PLAYBOOK, **values)
    else:
        out.write(f"roles/{name}/tasks/main.yml", _render(t.ROLE_TASKS_HEADER, **values) + tasks)
        out.write(f"roles/{name}/defaults/main.yml", _render(t.ROLE_DEFAULTS, **values))
        out.write(f"roles/{name}/meta/main.yml", _render(t.ROLE_META, **values))
        out.write(f"roles/{name}/README.md", _render(t.ROLE_README, **values))
        entry = _render(t.WATCH_ROLE, **values)
    out.write(f"config/crd/bases/{full_group}_{plural}.yaml", _render(t.CRD, **values))
    out.write(f"config/samples/{group}_{version}_{name}.yaml", _render(t.SAMPLE, **values))
    out.write(f"tests/test_{name}.py", _render(t.TEST, **values))

    _append_watch(directory, entry)
    _add_rbac(directory, project_name, full_group, plural)
    project["resources"].append(
        {
            "domain": domain,
            "group": group,
            "version": version,
            "kind": kind,
            "plural": plural,
            "reconciler": f"playbooks/{name}.yml" if playbook else f"roles/{name}",
        }
    )
    (directory / PROJECT_FILE).write_text(
        t.PROJECT_HEADER + yaml.safe_dump(project, sort_keys=False), encoding="utf-8"
    )
    print(f"updated {PROJECT_FILE}")


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


def _append_watch(directory: Path, entry: str) -> None:
    """Append `entry` as text, keeping the user's comments and formatting."""
    path = directory / "watches.yaml"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    if text.strip() and yaml.safe_load(text) == []:
        # the empty flow list `init` writes: the first entry replaces it
        text = re.sub(r"(?m)^\[\]\s*(#.*)?$\n?", "", text, count=1)
    if text and not text.endswith("\n"):
        text += "\n"
    path.write_text(text + entry, encoding="utf-8")
    print("updated watches.yaml")


def _add_rules(role: dict[str, Any], wanted: list[dict[str, Any]]) -> bool:
    rules = role.setdefault("rules", []) or []
    role["rules"] = rules
    changed = False
    for rule in wanted:
        existing = next(
            (
                r
                for r in rules
                if isinstance(r, dict)
                and r.get("apiGroups") == rule["apiGroups"]
                and r.get("resources") == rule["resources"]
            ),
            None,
        )
        if existing is None:
            rules.append(rule)
            changed = True
        else:
            verbs = list(existing.get("verbs") or [])
            missing = [v for v in rule["verbs"] if v not in verbs]
            if missing:
                existing["verbs"] = verbs + missing
                changed = True
    return changed


def _add_rbac(directory: Path, project: str, group: str, plural: str) -> None:
    path = directory / ROLE_FILE
    if path.exists():
        try:
            docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
        except yaml.YAMLError as error:
            raise ScaffoldError(f"{path} is not valid YAML: {error}") from None
    else:
        docs = [_initial_cluster_role(project)]
    role = next((d for d in docs if isinstance(d, dict) and d.get("kind") == "ClusterRole"), None)
    if role is None:
        print(f"warning: no ClusterRole in {ROLE_FILE}; add rules for {plural}.{group} yourself")
        return
    changed = _add_rules(
        role,
        [
            {
                "apiGroups": [group],
                "resources": [plural, f"{plural}/status", f"{plural}/finalizers"],
                "verbs": list(CRUD),
            },
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": list(CRUD)},
        ],
    )
    if changed or not path.exists():
        existed = path.exists()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_role_text(*docs), encoding="utf-8")
        print(f"{'updated' if existed else 'created'} {ROLE_FILE}")
