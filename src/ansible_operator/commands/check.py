"""`ansible-operator check`: what will fail in a project, found without a cluster.

Loads the project's watches.yaml (as `run` does), then the roles and playbooks
of its watches and webhooks with the installed ansible-core (YAML and syntax
errors, modules and actions that the collections path cannot resolve), and checks
their templates for the ansible-core 2.18 -> 2.19 changes that break existing
roles (lint/templating.py); a webhook's, also for names its run does not define
and for never answering (lint/webhook_roles.py); what their Kubernetes tasks
do against config/rbac/role.yaml (lint/rbac.py, following the templates and files
their definitions look up; `--fix-rbac` adds what is missing); and the CRDs of
config/crd/bases: a served version the API server cannot convert, and, with
`--crd-baseline cluster|REVISION`, what is unsafe against the CRDs installed or at a git
revision (lint/crds.py: removed versions still stored, removed or retyped fields, new
required fields without a default).
Prints `file:line: error|warning: message`; exits 1 when something will fail, and
with `--strict` when the role file does not allow what a task does. The summary
counts the Kubernetes tasks whose kind cannot be known without running them.
Then, on stderr with the summary, a note: the spec keys the operator refuses because
a watch's role or playbook assigns a variable of that name (lint/assigned_vars.py).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from ansible_operator.lint import yaml_nodes as y
from ansible_operator.lint.ansible_load import load_in_child, task_keywords
from ansible_operator.lint.assigned_vars import assigned_vars
from ansible_operator.lint.crds import Baseline, CrdFile, crd_files, crd_findings, git_baseline
from ansible_operator.lint.findings import Finding, error, place
from ansible_operator.lint.jinja_types import Inferred, Scope
from ansible_operator.lint.project import Targets, role_files, targets_of
from ansible_operator.lint.rbac import (
    ROLE_FILE,
    Unknown,
    Use,
    gaps,
    kinds_of_project,
    missing_rules,
    read_rules,
    uses_in_tasks,
)
from ansible_operator.lint.templating import TaskChecker, registered_names, variables_of
from ansible_operator.lint.watch_targets import load_reading_on
from ansible_operator.lint.webhook_roles import (
    answer_findings,
    undefined_name_findings,
    webhook_variables,
)
from ansible_operator.scaffold.yaml_edit import YamlEditError, append_to_list
from ansible_operator.values.rbac_rules import is_role

__all__ = ["add_check_arguments", "check", "check_project", "fix_rbac", "rbac_of_project"]


def add_check_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "directory",
        nargs="?",
        type=Path,
        default=Path(),
        help="the operator project (default: the current directory, where `run` would "
        "start: its ansible.cfg then applies to the roles and collections paths too)",
    )
    parser.add_argument(
        "--watches-file", type=Path, help="default: watches.yaml in the project directory"
    )
    parser.add_argument("--ansible-roles-path", help="ANSIBLE_ROLES_PATH, as for `run`")
    parser.add_argument("--ansible-collections-path", help="ANSIBLE_COLLECTIONS_PATH, as for `run`")
    parser.add_argument(
        "--list-rbac",
        action="store_true",
        help="print each Kubernetes resource and verb the roles and playbooks use, "
        "and the tasks whose kind cannot be known without running them",
    )
    parser.add_argument(
        "--crd-baseline",
        metavar="cluster|REVISION",
        help="also compare config/crd/bases with the CRDs before: 'cluster' (those installed "
        "where KUBECONFIG points) or a git revision (main, v1.2.0, HEAD~1); a removed version "
        "still stored, a removed or retyped field, a new required field without a default "
        "are errors",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help=f"an RBAC gap (a task doing what {ROLE_FILE} does not allow) is an error: "
        "exit 1 (`make deploy` and `make dev` run this)",
    )
    parser.add_argument(
        "--fix-rbac",
        action="store_true",
        help=f"add the rules the roles and playbooks need to {ROLE_FILE} (the rest of "
        "the file is kept as it is)",
    )


def check(args: argparse.Namespace) -> int:
    directory = args.directory.resolve()
    options = {
        "watches_file": args.watches_file,
        "roles_path": args.ansible_roles_path,
        "collections_path": args.ansible_collections_path,
    }
    if args.list_rbac or args.fix_rbac:
        uses, unknown = rbac_of_project(directory, **options)
        if args.list_rbac:
            _list_rbac(uses, unknown)
        if args.fix_rbac:
            fix_rbac(directory, uses)
    try:
        baseline = crd_baseline(directory, args.crd_baseline) if args.crd_baseline else None
    except (ValueError, OSError) as failure:
        print(f"ansible-operator check: --crd-baseline: {failure}", file=sys.stderr)
        return 2
    findings, targets = check_project(
        directory, strict=args.strict, **options, crd_baseline=baseline
    )
    for finding in findings:
        print(finding.format(relative_to=Path.cwd()))
    env = _environment(directory, args.ansible_roles_path, args.ansible_collections_path)
    watches_file = Path(args.watches_file or directory / "watches.yaml")
    for line in _refused_spec_keys(directory, watches_file, env):
        print(line, file=sys.stderr)
    errors = sum(f.is_error for f in findings)
    warnings = len(findings) - errors
    checked = f"{_count(len(targets.roles), 'role')}, {_count(len(targets.playbooks), 'playbook')}"
    if findings:
        summary = f"{_count(errors, 'error')}, {_count(warnings, 'warning')} in {checked}"
    else:
        summary = f"no problems found in {checked}"
    print(f"ansible-operator check: {summary}", file=sys.stderr)
    unknown = unresolved_tasks(targets)
    if unknown:
        print(
            f"ansible-operator check: {_count(unknown, 'Kubernetes task')} whose kind is known "
            "only when it runs: their RBAC is not checked (`check --list-rbac` lists them)",
            file=sys.stderr,
        )
    return 1 if errors else 0


def unresolved_tasks(targets: Targets) -> int:
    """The tasks (file, line) whose kind check could not know, as check_project found them."""
    return len({(item.path, item.line) for item in targets.rbac_unknown})


def crd_baseline(directory: Path, which: str) -> Baseline:
    """The CRDs before: `cluster` (read once, where KUBECONFIG points) or a git revision."""
    if which != "cluster":
        return git_baseline(directory, which)
    import asyncio

    from ansible_operator.cluster import connect_config
    from ansible_operator.conversion.migration import CRDS
    from ansible_operator.kube.client import ApiClient, ApiError
    from ansible_operator.kube.config import KubeConfigError

    files, _ = crd_files(directory)

    async def read() -> dict[str, dict[str, Any] | None]:
        found: dict[str, dict[str, Any] | None] = {}
        async with ApiClient(connect_config()) as api:
            for file in files:
                try:
                    found[file.name] = await api.get(CRDS, file.name)
                except ApiError as failure:
                    if failure.status != 404:
                        raise ValueError(f"cannot read CRD {file.name}: {failure}") from None
                    found[file.name] = None
        return found

    try:
        installed = asyncio.run(read())
    except KubeConfigError as failure:
        raise ValueError(str(failure)) from None

    def before(file: CrdFile) -> dict[str, Any] | None:
        return installed.get(file.name)

    return before


class _Run(NamedTuple):
    """A target some watches run, and the names their specMayOverride lets a spec set."""

    role: Path | None
    playbook: Path | None
    allowed: tuple[str, ...]


def _refused_spec_keys(directory: Path, watches_file: Path, env: Mapping[str, str]) -> list[str]:
    """The note on the names each watch's role or playbook assigns itself, less its
    `specMayOverride`: an object whose spec sets one would forge it, so the operator
    refuses that object (project/watch_admission.py). It fails nothing here (on stderr:
    stdout is the findings, one per line, that tools parse)."""
    try:
        loaded, _ = load_reading_on(watches_file, env, directory)
    except FileNotFoundError:
        return []  # check_project reported it
    runs: dict[_Run, list[str]] = {}  # one listing for the watches that share a run
    for watch in loaded.watches if loaded is not None else []:
        for deleting in (False, True):
            target = watch.target(deleting=deleting)
            if deleting and target == watch.target(deleting=False):
                continue
            run = _Run(*target, tuple(sorted(watch.spec_may_override)))
            runs.setdefault(run, []).append(f"{watch.gvk.kind}{', when deleted' * deleting}")
    here = Path.cwd()
    lines = []
    for run, kinds in sorted(runs.items(), key=lambda item: str(item[0].playbook or item[0].role)):
        target = run.playbook or run.role
        if target is None:
            continue
        found = assigned_vars(run.role, run.playbook, directory, env)
        refused = {name: a for name, a in found.names.items() if name not in run.allowed}
        if not refused and not found.unresolved:
            continue
        lines.append(f"  {', '.join(kinds)} ({_shown(target, here)}):")
        width = max((len(name) for name in refused), default=0)
        lines += [f"    {name:<{width}}  {a.where(here)}" for name, a in sorted(refused.items())]
        if kept := sorted(set(run.allowed) & set(found.names)):
            lines.append(f"    may be set (specMayOverride): {', '.join(kept)}")
        if found.unresolved:
            lines.append("    and names known only when it runs (not refused):")
            lines += [f"      {unresolved.where(here)}" for unresolved in found.unresolved]
    if not lines:
        return []
    return ["spec keys that would shadow a role's own variables (refused by the operator):", *lines]


def _shown(path: Path, here: Path) -> str:
    with contextlib.suppress(ValueError):
        return str(path.resolve().relative_to(here.resolve()))
    return str(path)


def _list_rbac(uses: list[Use], unknown: list[Unknown]) -> None:
    here = Path.cwd()
    for use in uses:
        print(f"{place(use.path, use.line, here)}: {use.shown}: {', '.join(use.verbs)}")
    for item in unknown:
        print(f"{place(item.path, item.line, here)}: unknown: {item.module}: {item.why}")


def fix_rbac(directory: Path, uses: list[Use]) -> None:
    """Append the rules `uses` need to the project's role file; say what was added."""
    path = directory / ROLE_FILE
    rules = read_rules(path)
    if rules is None:
        print(f"{ROLE_FILE}: no ClusterRole or Role to add rules to", file=sys.stderr)
        return
    text = path.read_text(encoding="utf-8")
    added = missing_rules(uses, rules)
    comment: str | None = "Added by `ansible-operator check --fix-rbac`."
    for rule in added:
        try:
            text = append_to_list(text, rule, key="rules", document=is_role, comment=comment)
        except YamlEditError as failure:
            print(f"{ROLE_FILE}: cannot add {rule}: {failure}; nothing written", file=sys.stderr)
            return
        comment = None
    if added:
        path.write_text(text, encoding="utf-8")
    print(
        f"ansible-operator check: {_count(len(added), 'rule')} added to {ROLE_FILE}",
        file=sys.stderr,
    )


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def check_project(
    directory: Path,
    *,
    watches_file: Path | None = None,
    roles_path: str | None = None,
    collections_path: str | None = None,
    strict: bool = False,
    crd_baseline: Baseline | None = None,
) -> tuple[list[Finding], Targets]:
    """Every finding in the project, sorted by file and line; and what was checked
    (with the Kubernetes tasks whose kind could not be known: `rbac_unknown`).
    `strict`: an RBAC gap is an error."""
    directory = Path(directory).resolve()
    watches_file = Path(watches_file or directory / "watches.yaml")
    env = _environment(directory, roles_path, collections_path)
    try:
        loaded, missing = load_reading_on(watches_file, env, directory)
    except FileNotFoundError:
        return [error(watches_file, 1, "no such file (pass --watches-file)")], Targets()
    if loaded is None:
        return sorted(missing), Targets()

    targets = targets_of(loaded.watches, directory, env, loaded.webhooks, loaded.conversions)
    findings = set(missing)
    findings.update(load_in_child(targets.roles, targets.playbooks, env, cwd=directory))
    keywords = task_keywords()
    for target, webhooks in targets.of_webhooks.items():
        findings.update(answer_findings(target, webhooks, directory, env))
        if target not in targets.of_watches:
            findings.update(undefined_name_findings(target, webhooks, directory, env))
    for role in targets.roles:
        findings.update(_check_role(role, keywords, _run_variables(targets, role)))
    for playbook in targets.playbooks:
        root = _compose(playbook)
        scope = Scope(
            variables=_run_variables(targets, playbook),
            registered=frozenset(registered_names(root)),
        )
        checker = TaskChecker(playbook, keywords, scope)
        checker.playbook(root)
        findings.update(checker.findings)
    role_file = directory / ROLE_FILE
    rules = read_rules(role_file) if role_file.is_file() else None
    uses, unknown = _rbac_uses(directory, targets, keywords)
    targets.rbac_unknown = unknown
    if rules is not None:
        findings.update(gaps(uses, rules, str(ROLE_FILE), strict=strict))
    findings.update(crd_findings(directory, loaded.conversions, crd_baseline))
    return sorted(findings, key=lambda f: (f.path, f.line, f.severity.value, f.message)), targets


def rbac_of_project(
    directory: Path,
    *,
    watches_file: Path | None = None,
    roles_path: str | None = None,
    collections_path: str | None = None,
) -> tuple[list[Use], list[Unknown]]:
    """What the project's roles and playbooks do to the API, as far as it can be known."""
    directory = Path(directory).resolve()
    env = _environment(directory, roles_path, collections_path)
    watches_file = Path(watches_file or directory / "watches.yaml")
    loaded, _ = load_reading_on(watches_file, env, directory)
    if loaded is None:
        return [], []
    targets = targets_of(loaded.watches, directory, env, loaded.webhooks, loaded.conversions)
    return _rbac_uses(directory, targets, task_keywords())


def _rbac_uses(
    directory: Path, targets: Targets, keywords: frozenset[str]
) -> tuple[list[Use], list[Unknown]]:
    kinds = kinds_of_project(directory)
    uses: list[Use] = []
    unknown: list[Unknown] = []
    files = [
        (role, role_files(role, "tasks") + role_files(role, "handlers")) for role in targets.roles
    ]
    files += [(playbook.parent, [playbook]) for playbook in targets.playbooks]
    for home, paths in files:
        for path in paths:
            found = uses_in_tasks(
                path,
                _compose(path),
                keywords,
                kinds,
                files=[home / "files", directory],
                home=home,
                project=directory,
            )
            uses += found[0]
            unknown += found[1]
    return sorted(set(uses)), sorted(set(unknown))


def _environment(
    directory: Path, roles_path: str | None, collections_path: str | None
) -> dict[str, str]:
    """The environment of the project's runs: where roles and collections are found."""
    from ansible_operator.runner.environment import ansible_environment

    env = {
        **os.environ,
        **ansible_environment(
            roles_path=roles_path, collections_path=collections_path, pipelining=False
        ),
    }
    if (directory / "ansible.cfg").is_file() and "ANSIBLE_CONFIG" not in env:
        env["ANSIBLE_CONFIG"] = str(directory / "ansible.cfg")
    return env


def _compose(path: Path) -> yaml.Node | None:
    """The file's nodes; None when it is not YAML (loading it with Ansible reports that)."""
    try:
        return y.compose_file(path)
    except (OSError, yaml.YAMLError):
        return None


def _run_variables(targets: Targets, target: Path) -> dict[str, Inferred]:
    """The variables a run gives the role or playbook: a webhook's are known."""
    webhooks = targets.of_webhooks.get(target)
    return webhook_variables(webhooks) if webhooks else {}


def _check_role(
    role: Path, keywords: frozenset[str], run_variables: dict[str, Inferred]
) -> list[Finding]:
    variables = dict(run_variables)
    for folder in ("defaults", "vars"):
        for path in role_files(role, folder):
            variables.update(variables_of(_compose(path)))
    task_files = role_files(role, "tasks") + role_files(role, "handlers")
    roots = {path: _compose(path) for path in task_files}
    registered = frozenset(name for root in roots.values() for name in registered_names(root))
    scope = Scope(variables=variables, registered=registered)

    findings: list[Finding] = []
    for folder in ("defaults", "vars"):
        for path in role_files(role, folder):
            checker = TaskChecker(path, keywords, replace(scope))
            checker.variables(_compose(path))
            findings += checker.findings
    for path, root in roots.items():
        checker = TaskChecker(path, keywords, replace(scope))
        checker.task_file(root)
        findings += checker.findings
    return findings
