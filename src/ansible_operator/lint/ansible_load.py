"""Load roles and playbooks with the installed ansible-core, as a run would, and
report what it refuses: YAML and syntax errors, unknown modules and actions.

It runs in a child process (`load_in_child`): ansible-core reads its settings
(collections path, ansible.cfg) when imported and keeps global plugin state, so
the check gets a fresh one with the settings of the operator's runs.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import yaml

from ansible_operator.lint.findings import Finding, Severity, error
from ansible_operator.lint.project import yaml_files

__all__ = ["load_in_child", "task_keywords"]

_BLOCK_KEYS = ("block", "rescue", "always")
_PLAY_TASK_LISTS = ("pre_tasks", "tasks", "post_tasks", "handlers")


def task_keywords() -> frozenset[str]:
    """Keys of a task that are not its module (`when`, `loop`, `register`, ...)."""
    from ansible.playbook.block import Block
    from ansible.playbook.handler import Handler
    from ansible.playbook.task import Task

    return (
        frozenset(Task.fattributes)
        | frozenset(Handler.fattributes)
        | frozenset(Block.fattributes)
        | {"local_action", "action", "args"}
    )


def load_in_child(
    roles: list[Path], playbooks: list[Path], env: dict[str, str], cwd: Path
) -> list[Finding]:
    """Findings of loading `roles` and `playbooks` in a fresh interpreter."""
    request = json.dumps(
        {"roles": [str(r) for r in roles], "playbooks": [str(p) for p in playbooks]}
    )
    done = subprocess.run(
        [sys.executable, "-m", "ansible_operator.lint.ansible_load"],
        input=request,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        check=False,
    )
    try:
        return [
            Finding(f["path"], f["line"], Severity(f["severity"]), f["message"])
            for f in json.loads(done.stdout)
        ]
    except (ValueError, KeyError, TypeError):
        detail = " ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        where = str(roles[0] if roles else playbooks[0] if playbooks else ".")
        return [error(where, 1, f"could not load the project with ansible-core: {detail}")]


# -- the child --------------------------------------------------------------------------


class _Loader:
    """Ansible's own objects, set up as for a run on localhost."""

    def __init__(self) -> None:
        from ansible import constants
        from ansible.inventory.manager import InventoryManager
        from ansible.parsing.dataloader import DataLoader
        from ansible.plugins.loader import init_plugin_loader
        from ansible.vars.manager import VariableManager

        init_plugin_loader(constants.COLLECTIONS_PATHS)
        self.collections_paths = [str(p) for p in constants.COLLECTIONS_PATHS]
        self.loader = DataLoader()
        inventory = InventoryManager(loader=self.loader, sources=["localhost,"])
        self.variables = VariableManager(loader=self.loader, inventory=inventory)
        self.findings: dict[tuple[str, int, str], Finding] = {}

    def report(self, failure: Exception, path: Path) -> None:
        where, line = _origin(failure, path)
        message = _message(failure)
        if "couldn't resolve module/action" in message:
            message += f" Collections are looked up in: {', '.join(self.collections_paths)}."
        conflict = _CONFLICT.search(message)
        if conflict:
            message += _option_at_task_level(conflict["first"], conflict["second"])
        self.findings.setdefault((where, line, message), error(where, line, message))

    def load_file(self, path: Path) -> Any:
        from ansible.errors import AnsibleError

        try:
            return self.loader.load_from_file(str(path))
        except AnsibleError as failure:
            self.report(failure, path)
            return None

    def play(self, path: Path, data: dict[str, Any]) -> None:
        from ansible.errors import AnsibleError
        from ansible.playbook.play import Play

        try:
            play = Play.load(data, variable_manager=self.variables, loader=self.loader)
            play.compile()
        except AnsibleError as failure:
            self.report(failure, path)

    def role(self, role: Path) -> None:
        from ansible.plugins.loader import add_all_plugin_dirs

        add_all_plugin_dirs(str(role))  # the role's library/, as loading it for a run does
        collections = _with_default(self._role_collections(role))
        for folder in ("tasks", "handlers"):
            for path in yaml_files(role / folder):
                self.resolve_actions(path, self.load_file(path), collections)
        play = {"hosts": "localhost", "gather_facts": False}
        self.play(role / "tasks" / "main.yml", {**play, "roles": [str(role)]})
        for path in yaml_files(role / "tasks"):
            tasks_from = str(path.relative_to(role / "tasks"))
            if path.stem != "main":
                include = {"name": str(role), "tasks_from": tasks_from}
                self.play(path, {**play, "tasks": [{"import_role": include}]})

    def playbook(self, path: Path) -> None:
        from ansible.errors import AnsibleError
        from ansible.playbook import Playbook

        try:
            Playbook.load(str(path), variable_manager=self.variables, loader=self.loader)
        except AnsibleError as failure:
            self.report(failure, path)
        plays = self.load_file(path)
        for play in plays if isinstance(plays, list) else []:
            if not isinstance(play, dict):
                continue
            collections = _with_default(list(play.get("collections") or []))
            for key in _PLAY_TASK_LISTS:
                self.resolve_actions(path, play.get(key), collections)

    def resolve_actions(self, path: Path, tasks: Any, collections: list[str] | None) -> None:
        """Every task's module or action, resolved as Ansible does when it
        loads the task (so all unknown ones are reported, not only the first)."""
        from ansible.errors import AnsibleError
        from ansible.parsing.mod_args import ModuleArgsParser

        for task in _tasks(tasks):
            try:
                ModuleArgsParser(task, collection_list=collections).parse()
            except AnsibleError as failure:
                self.report(failure, path)

    def _role_collections(self, role: Path) -> list[str]:
        for meta in yaml_files(role / "meta"):
            if meta.stem == "main":
                data = self.load_file(meta)
                if isinstance(data, dict) and isinstance(data.get("collections"), list):
                    return [str(c) for c in data["collections"]]
        return []


_CONFLICT = re.compile(r"conflicting action statements: (?P<first>[\w.]+), (?P<second>[\w.]+)")


def _option_at_task_level(module: str, key: str) -> str:
    """ansible-core takes every key of a task that is not a keyword for an action
    when it loads the task, so a module option written beside the module (e.g.
    `wait:` under `k8s_info:` instead of inside it) fails the whole file: say so."""
    if key not in _module_options(module):
        return ""
    return (
        f"; `{key}` is an option of {module} written beside it, not under it: indent it "
        f"under `{module}:` (ansible-core reads every other key of a task as a module)"
    )


def _module_options(module: str) -> set[str]:
    """The options (and their aliases) `module` documents; none if it is not found."""
    from ansible.plugins.loader import fragment_loader, module_loader
    from ansible.utils.plugin_docs import get_docstring

    # The collections `check` runs with: a role's `collections:` only add to these.
    for collections in (None, ["kubernetes.core", "operator_sdk.util"]):
        found = module_loader.find_plugin_with_context(module, collection_list=collections)
        if found.resolved:
            break
    else:
        return set()
    try:
        doc = get_docstring(
            found.plugin_resolved_path,
            fragment_loader,
            collection_name=found.plugin_resolved_collection,
        )[0]
    except Exception:  # a module whose documentation does not load: no hint, no failure
        return set()
    options = (doc or {}).get("options") or {}
    return set(options) | {
        alias
        for spec in options.values()
        if isinstance(spec, dict)
        for alias in spec.get("aliases") or []
    }


def _with_default(collections: list[str]) -> list[str] | None:
    """As Ansible completes a `collections:` list: unqualified names stay found."""
    if not collections:
        return None
    if "ansible.builtin" not in collections and "ansible.legacy" not in collections:
        collections.append("ansible.legacy")
    return collections


def _tasks(tasks: Any) -> Iterator[dict[str, Any]]:
    for task in tasks if isinstance(tasks, list) else []:
        if not isinstance(task, dict):
            continue
        if any(key in task for key in _BLOCK_KEYS):
            for key in _BLOCK_KEYS:
                yield from _tasks(task.get(key))
        else:
            yield task


# ansible-core before 2.19 appends the file, line and source lines to the message;
# a finding already starts with the file and line.
_SOURCE_EXCERPT = re.compile(
    r"\n\n(?:The error appears to|\(could not open file to display line\)).*", re.DOTALL
)


def _cause(failure: Exception) -> BaseException | None:
    """What Ansible was wrapping: `raise from` in 2.19+, `orig_exc` before."""
    return failure.__cause__ or getattr(failure, "orig_exc", None)


def _message(failure: Exception) -> str:
    """Ansible's message on one line, the same on every supported ansible-core:
    a YAML error reads as 2.19+ words it (2.18 says "We were unable to read
    either as JSON nor YAML" and quotes the parser's marks), and 2.18's
    appended source excerpt is left out."""
    text = str(failure)
    cause = _cause(failure)
    if isinstance(cause, yaml.MarkedYAMLError) and not text.startswith("YAML parsing failed"):
        words = " ".join(filter(None, (cause.context, cause.problem, cause.note))).strip()
        words = f"{words[:1].upper()}{words[1:]}".rstrip(".")
        text = f"YAML parsing failed: {words}."
    return " ".join(_SOURCE_EXCERPT.sub("", text).split())


def _origin(failure: Exception, path: Path) -> tuple[str, int]:
    """Where Ansible says the problem is: the tagged object's origin (2.19+) or
    `ansible_pos` (older); for YAML that ends before something was closed, the
    line where that something started."""
    where, line = _tagged_origin(getattr(failure, "obj", None)) or (str(path), 1)
    cause = _cause(failure)
    if isinstance(cause, yaml.MarkedYAMLError) and cause.problem_mark is not None:
        line = cause.problem_mark.line + 1
        at_end = cause.problem_mark.index >= len(_read(Path(where)).rstrip())
        if at_end and cause.context_mark is not None:
            line = cause.context_mark.line + 1
    return where, line


def _tagged_origin(found: Any) -> tuple[str, int] | None:
    if found is None:
        return None
    try:
        from ansible._internal._datatag._tags import Origin
    except ImportError:  # ansible-core before 2.19
        position = getattr(found, "ansible_pos", None)
        return (str(position[0]), int(position[1])) if position else None
    origin = found if isinstance(found, Origin) else Origin.get_tag(found)
    if origin is None or not origin.path:
        return None
    return origin.path, origin.line_num or 1


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return ""


def main() -> int:
    request = json.load(sys.stdin)
    # stdout carries the findings only; whatever Ansible prints goes to stderr
    out, sys.stdout = sys.stdout, sys.stderr
    os.environ.setdefault("ANSIBLE_DEPRECATION_WARNINGS", "False")
    loader = _Loader()
    for role in request["roles"]:
        loader.role(Path(role))
    for playbook in request["playbooks"]:
        loader.playbook(Path(playbook))
    json.dump(
        [{**asdict(f), "severity": f.severity.value} for f in sorted(loader.findings.values())],
        out,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
