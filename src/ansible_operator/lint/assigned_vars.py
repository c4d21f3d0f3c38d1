"""The variables a watch's role or playbook assigns itself, found by reading its YAML:
the names a custom object's spec may not set.

Each top-level key of an object's spec becomes an extra var, and extra vars beat
whatever a role assigns: a `register:` result, a `set_fact`, an `include_vars`, the
`vars:` of a task or block (each seen forged on ansible-core 2.21). Whoever may write
the object would steer the role (a `when:` on a registered `k8s_info` result, say), so
the operator refuses an object whose spec sets one of these names (`ASSIGNING`). Not
listed: a role's `defaults/`, a play's `vars`, `vars_files` and `vars_prompt`, role
parameters, a role's `vars/` (the defaults a spec is meant to override, Operator SDK's
playbook scaffold among them: the reader follows them, and leaves them), and loop
variables (the loop wins over an extra var, with a warning).

Read without Ansible, as `check` reads the rest: what cannot be known without running
(a templated file, name or key; a file that is not there or is encrypted) is kept as
`Unresolved`, for `check` to say that those names are not refused. A file that is not
YAML is skipped (`check` reports it when it loads the role).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import yaml

from ansible_operator.lint import yaml_nodes as y
from ansible_operator.lint.findings import place
from ansible_operator.lint.project import (
    role_files,
    roles_reached,
    roles_used_by_playbook,
)

__all__ = [
    "AssignedVars",
    "Assignment",
    "Unresolved",
    "assigned_names",
    "assigned_places",
    "assigned_vars",
]


@dataclass(frozen=True)
class Assignment:
    name: str  # the variable assigned
    path: Path  # the file that assigns it
    line: int  # 1-based, of the assigning key
    how: str  # "register", "set_fact", "vars of a task", "include_vars file", ...

    def where(self, relative_to: Path | None = None) -> str:
        """`roles/x/tasks/main.yml:12 (register)`: the file relative to `relative_to`
        (default: the current directory, the project's for `check` and the operator)."""
        return f"{place(self.path, self.line, relative_to or Path.cwd())} ({self.how})"


@dataclass(frozen=True)
class Unresolved:
    """A place that assigns names only a run knows."""

    path: Path
    line: int
    what: str  # "include_vars of a templated file `{{ os }}.yml`"

    def where(self, relative_to: Path | None = None) -> str:
        return f"{place(self.path, self.line, relative_to or Path.cwd())} ({self.what})"


@dataclass
class AssignedVars:
    names: dict[str, Assignment] = field(default_factory=dict)  # each name's first assignment
    unresolved: list[Unresolved] = field(default_factory=list)


def assigned_names(
    role: Path | None, playbook: Path | None, directory: Path, env: Mapping[str, str]
) -> dict[str, Assignment]:
    """Each name the role or playbook (and every role it uses) assigns: its first
    assignment. A playbook wins over a role, as when the watch runs."""
    return assigned_vars(role, playbook, directory, env).names


def assigned_places(
    role: Path | None, playbook: Path | None, directory: Path, env: Mapping[str, str]
) -> dict[str, str]:
    """Each assigned name with where (`roles/x/tasks/main.yml:12 (register)`, relative
    to `directory`): what the operator's refusals name (project/watch_admission.py)."""
    found = assigned_names(role, playbook, directory, env)
    return {name: each.where(directory) for name, each in found.items()}


def assigned_vars(
    role: Path | None, playbook: Path | None, directory: Path, env: Mapping[str, str]
) -> AssignedVars:
    """As `assigned_names`, with the places whose names cannot be known statically."""
    reader = _Reader()
    if playbook is not None:
        reader.playbook(playbook)
        # roles named in the playbooks it imports and the task files it includes too
        starts = [
            found
            for path in reader.outside_roles
            for found in roles_used_by_playbook(path, directory, env)
        ]
    else:
        starts = [role] if role is not None else []
    roles = roles_reached(starts, directory, env)
    for reached in roles:
        reader.role(reached)
    reader.vars_from_roles(roles)
    return reader.found


# What the role assigns as it runs, which a spec key must not forge: a task's results
# and decisions. The rest a role or playbook gives its variables (a play's `vars`,
# `vars_files` and `vars_prompt`, role parameters and `roles:` entry vars, a role's
# `vars/`, `vars_from`, group_vars) are where operators put the defaults a spec key
# overrides, as Operator SDK's playbook scaffold does with a play's `vars`: found, not
# refused.
ASSIGNING = ("register", "set_fact", "include_vars", "vars of a task", "vars of a block")
# Includes that may hide tasks which assign: what they include is unknown when templated.
_HIDING = ("include_tasks", "import_tasks", "import_playbook", "include_role", "import_role")


def _spellings(*names: str) -> frozenset[str]:
    return frozenset(
        f"{prefix}{name}"
        for prefix in ("", "ansible.builtin.", "ansible.legacy.")
        for name in names
    )


_SET_FACT = _spellings("set_fact")
_INCLUDE_VARS = _spellings("include_vars")
_TASK_FILES = _spellings("include_tasks", "import_tasks")
_ROLE_INCLUDES = _spellings("include_role", "import_role")
_IMPORT_PLAYBOOK = _spellings("import_playbook")
_ACTIONS = _SET_FACT | _INCLUDE_VARS | _TASK_FILES | _ROLE_INCLUDES
_NESTED = ("block", "rescue", "always")
_PLAY_TASKS = ("pre_tasks", "tasks", "post_tasks", "handlers")
# The keywords of a `roles:` or `dependencies:` entry (ansible-core's RoleInclude
# attributes): any other key of the entry is a role parameter, a variable of the role.
_ROLE_KEYWORDS = frozenset(
    [
        "any_errors_fatal",
        "become",
        "become_exe",
        "become_flags",
        "become_method",
        "become_user",
        "check_mode",
        "collections",
        "connection",
        "debugger",
        "delegate_facts",
        "delegate_to",
        "diff",
        "environment",
        "ignore_errors",
        "ignore_unreachable",
        "module_defaults",
        "name",
        "no_log",
        "port",
        "remote_user",
        "role",
        "run_once",
        "tags",
        "throttle",
        "timeout",
        "vars",
        "when",
    ]
)
_INCLUDE_VARS_OPTIONS = frozenset(
    {"dir", "depth", "files_matching", "ignore_files", "extensions", "file", "name"}
    | {"hash_behaviour", "ignore_unknown_extensions"}
)
_VARS_SUFFIXES = (".yml", ".yaml", ".json")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STR = "tag:yaml.org,2002:str"


class _At(NamedTuple):
    """Where a task is, for finding the files it names as Ansible does."""

    file: Path
    role: Path | None  # the role whose task it is
    base: Path | None  # the playbook's directory (a role's is the run's: unknown here)


class _Reader:
    def __init__(self) -> None:
        self.found = AssignedVars()
        self.read: set[Path] = set()  # task files and playbooks, each read once
        self.outside_roles: list[Path] = []  # playbooks and the task files they include
        self.vars_from: list[tuple[str, yaml.Node, Path, str]] = []  # for when roles are known

    # -- what is found ------------------------------------------------------------------

    def assign(self, name: str, path: Path, node: yaml.Node, how: str) -> None:
        if not how.startswith(ASSIGNING):
            return  # a default the spec is meant to override (see ASSIGNING)
        if _templated(name):
            self.unknown(path, node, f"{how} of a templated name `{name}`")
        elif name and name not in self.found.names:
            self.found.names[name] = Assignment(name, path, y.line_of(node), how)

    def unknown(self, path: Path, node: yaml.Node | None, what: str) -> None:
        if not what.startswith((*ASSIGNING, *_HIDING)):
            return
        line = y.line_of(node) if node is not None else 1
        self.found.unresolved.append(Unresolved(path, line, what))

    def keys(self, node: yaml.Node | None, path: Path, how: str) -> None:
        """The keys of a `vars:` mapping (or of a list of them, an older form)."""
        mappings = node.value if isinstance(node, yaml.SequenceNode) else [node]
        for mapping in mappings:
            for name, key_node, _ in y.items(mapping):
                self.assign(name, path, key_node, how)

    def vars_file(self, path: Path, how: str, origin: tuple[Path, yaml.Node] | None) -> None:
        """The top-level names of a file of variables; `origin` is the task or play that
        loads it, where what cannot be read is reported."""
        at, node = origin or (path, None)
        try:
            root = y.compose_file(path)
        except (OSError, ValueError, yaml.YAMLError):
            if origin is not None:
                self.unknown(at, node, f"{how} `{path.name}` cannot be read as YAML")
            return
        if root is not None and not isinstance(root, yaml.MappingNode):
            self.unknown(at, node, f"{how} `{path.name}` is not a mapping (encrypted?)")
        self.keys(root, path, how)

    # -- roles --------------------------------------------------------------------------

    def role(self, role: Path) -> None:
        for path in role_files(role, "meta"):
            root = _compose(path)
            self.role_entries(y.get(root, "dependencies"), path, "a role dependency")
        for path in role_files(role, "vars"):
            self.vars_file(path, "the role's vars/main.yml", None)
        for folder in ("tasks", "handlers"):
            for path in _main_first(role_files(role, folder)):
                self.task_file(path, _At(path, role, None))

    def role_entries(self, node: yaml.Node | None, path: Path, whose: str) -> None:
        if not isinstance(node, yaml.SequenceNode):
            return
        for entry in node.value:
            for key, key_node, value in y.items(entry):
                if key == "vars":
                    self.keys(value, path, f"vars of {whose}")
                elif key not in _ROLE_KEYWORDS:
                    self.assign(key, path, key_node, f"parameter of {whose}")

    def vars_from_roles(self, roles: list[Path]) -> None:
        """`vars_from:` of include_role/import_role: a file of the named role's `vars/`."""
        by_name: dict[str, Path] = {}
        for role in roles:
            by_name.setdefault(role.name, role)
        for name, node, path, action in self.vars_from:
            wanted = str(_text(node))
            how = f"vars_from of {action}"
            role = by_name.get(Path(name).name)
            if _templated(wanted) or _templated(name):
                self.unknown(path, node, f"{how} of a templated file `{wanted}` or role")
            elif role is None:
                self.unknown(path, node, f"{how}: role `{name}` not found")
            else:
                files = _vars_from_files(role / "vars" / wanted)
                if not files:
                    self.unknown(path, node, f"{how}: `{wanted}` not found in {name}/vars")
                for file in files:
                    self.vars_file(file, how, (path, node))

    # -- playbooks ----------------------------------------------------------------------

    def playbook(self, path: Path) -> None:
        if not self.first_read(path):
            return
        self.outside_roles.append(path)
        root = _compose(path)
        plays = root.value if isinstance(root, yaml.SequenceNode) else []
        at = _At(path, None, path.parent)
        for play in plays:
            imported = next((v for k, _, v in y.items(play) if k in _IMPORT_PLAYBOOK), None)
            if imported is not None:
                self.import_playbook(imported, path)
                self.keys(y.get(play, "vars"), path, "vars of an import_playbook")
                continue
            for key, _, value in y.items(play):
                if key == "vars":
                    self.keys(value, path, "vars of the play")
                elif key == "vars_files":
                    self.vars_files(value, path)
                elif key == "vars_prompt" and isinstance(value, yaml.SequenceNode):
                    for prompt in value.value:
                        name = y.get(prompt, "name")
                        if y.is_string(name):
                            self.assign(str(name.value), path, name, "vars_prompt of the play")
                elif key == "roles":
                    self.role_entries(value, path, "a play's role")
                elif key in _PLAY_TASKS:
                    self.tasks(value, at)
        for folder in ("group_vars", "host_vars"):
            # more than `all` and the operator's host: listing too much is the safe side
            for file in _vars_files_under(path.parent / folder):
                self.vars_file(file, f"{folder} next to the playbook", None)

    def import_playbook(self, node: yaml.Node, path: Path) -> None:
        source = _text(node)
        if source is None:
            return
        if _templated(source):
            self.unknown(path, node, f"import_playbook of a templated file `{source}`")
            return
        target = path.parent / Path(source).expanduser()
        if target.is_file():
            self.playbook(target)
        else:
            self.unknown(path, node, f"import_playbook `{source}` not found")

    def vars_files(self, node: yaml.Node, path: Path) -> None:
        entries = node.value if isinstance(node, yaml.SequenceNode) else [node]
        for entry in entries:
            # a list is a choice: the first file found is loaded
            choices = entry.value if isinstance(entry, yaml.SequenceNode) else [entry]
            sources = [_text(choice) for choice in choices]
            if any(source is None or _templated(source) for source in sources):
                self.unknown(path, entry, "vars_files of the play with a templated file")
                continue
            files = [path.parent / Path(str(s)).expanduser() for s in sources]
            found = next((file for file in files if file.is_file()), None)
            if found is None:
                self.unknown(path, entry, f"vars_files of the play: `{sources[0]}` not found")
            else:
                self.vars_file(found, "vars_files of the play", (path, entry))

    # -- tasks --------------------------------------------------------------------------

    def first_read(self, path: Path) -> bool:
        resolved = path.resolve()
        if resolved in self.read:
            return False
        self.read.add(resolved)
        return True

    def task_file(self, path: Path, at: _At) -> None:
        if self.first_read(path):
            self.tasks(_compose(path), at)

    def tasks(self, node: yaml.Node | None, at: _At) -> None:
        if isinstance(node, yaml.SequenceNode):
            for task in node.value:
                self.task(task, at)

    def task(self, task: yaml.Node, at: _At) -> None:
        entries = y.items(task)
        is_block = any(key == "block" for key, _, _ in entries)
        for key, key_node, value in entries:
            if key == "register" and y.is_string(value):
                self.assign(str(value.value), at.file, key_node, "register")
            elif key == "vars":
                self.keys(value, at.file, "vars of a block" if is_block else "vars of a task")
            elif key in _NESTED:
                self.tasks(value, at)
        action, args = _action(task)
        if action is None:
            return
        extra = y.get(task, "args")  # the task's `args:` keyword, merged with the action's
        if action in _SET_FACT:
            self.set_fact(args, at)
            self.set_fact(extra, at)
        elif action in _INCLUDE_VARS:
            options = {**_options(args, _INCLUDE_VARS_OPTIONS), **_options(extra, frozenset())}
            self.include_vars(options, at, args)
        elif action in _TASK_FILES:
            options = {
                **_options(args, frozenset({"file", "apply"})),
                **_options(extra, frozenset()),
            }
            self.include_tasks(options.get("file") or options.get("_raw_params"), action, at)
        elif action in _ROLE_INCLUDES:
            options = {**_options(args, frozenset()), **_options(extra, frozenset())}
            name, wanted = _text(options.get("name")), options.get("vars_from")
            if name is not None and _text(wanted) is not None:
                self.vars_from.append((name, wanted, at.file, action.rsplit(".")[-1]))

    def set_fact(self, node: yaml.Node | None, at: _At) -> None:
        if isinstance(node, yaml.MappingNode):
            for key, key_node, _ in y.items(node):
                if key != "cacheable":
                    self.assign(key, at.file, key_node, "set_fact")
        elif y.is_string(node):
            assert isinstance(node, yaml.ScalarNode)
            for key, _ in _key_values(str(node.value)):
                if key != "cacheable":
                    self.assign(key, at.file, node, "set_fact")

    def include_vars(self, options: dict[str, yaml.Node], at: _At, node: yaml.Node | None) -> None:
        if "name" in options:
            name = _text(options["name"])
            if name is not None:
                self.assign(name, at.file, options["name"], "include_vars name")
            return
        if "dir" in options:
            folder = _text(options["dir"])
            if folder is None:
                return
            if _templated(folder):
                self.unknown(at.file, options["dir"], f"include_vars of a templated dir `{folder}`")
                return
            found = _include_vars_dir(folder, at)
            if found is None:
                self.unknown(at.file, options["dir"], f"include_vars dir `{folder}` not found")
            for file in found or []:
                self.vars_file(file, "include_vars dir", (at.file, options["dir"]))
            return
        source_node = options.get("file") or options.get("_raw_params") or node
        source = _text(source_node)
        if source is None:
            return
        if _templated(source):
            self.unknown(at.file, source_node, f"include_vars of a templated file `{source}`")
            return
        file = next((c for c in _vars_candidates(source, at) if c.is_file()), None)
        if file is None:
            self.unknown(at.file, source_node, f"include_vars file `{source}` not found")
        else:
            self.vars_file(file, "include_vars file", (at.file, source_node))

    def include_tasks(self, node: yaml.Node | None, action: str, at: _At) -> None:
        source = _text(node)
        if source is None:
            return
        outside = at.role is None  # a role's task files are all read anyway
        if _templated(source):
            if outside:
                self.unknown(at.file, node, f"{action} of a templated file `{source}`")
            return
        path = Path(source).expanduser()
        bases = [at.role / "tasks" if at.role else None, at.file.parent, at.base]
        candidates = [base / path for base in bases if base is not None]
        target = next((c for c in candidates if c.is_file()), None)
        if target is None:
            if outside:
                self.unknown(at.file, node, f"{action} `{source}` not found")
            return
        if outside and target.resolve() not in self.read:
            self.outside_roles.append(target)
        self.task_file(target, at._replace(file=target))


# -- reading a task -------------------------------------------------------------------------


def _action(task: yaml.Node) -> tuple[str | None, yaml.Node | None]:
    """The task's action, when one this module reads, and its arguments."""
    for key, _, value in y.items(task):
        if key in _ACTIONS:
            return key, value
        if key in ("action", "local_action"):
            return _action_keyword(value)
    return None, None


def _action_keyword(node: yaml.Node) -> tuple[str | None, yaml.Node | None]:
    """`action: set_fact a=1` or `action: {module: set_fact, a: 1}`."""
    if y.is_string(node):
        assert isinstance(node, yaml.ScalarNode)
        module, _, rest = str(node.value).strip().partition(" ")
        args = yaml.ScalarNode(_STR, rest, node.start_mark, node.end_mark)
        return (module, args) if module in _ACTIONS else (None, None)
    module = _text(y.get(node, "module"))
    if module not in _ACTIONS or not isinstance(node, yaml.MappingNode):
        return None, None
    rest = [
        (k, v)
        for k, v in node.value
        if not (isinstance(k, yaml.ScalarNode) and k.value == "module")
    ]
    return module, yaml.MappingNode(node.tag, rest, node.start_mark, node.end_mark)


def _options(node: yaml.Node | None, known: frozenset[str]) -> dict[str, yaml.Node]:
    """An action's options: a mapping's, or the `k=v` words of a string among `known`
    (the other words are its free-form `_raw_params`, as ansible-core parses them)."""
    if isinstance(node, yaml.MappingNode):
        return {key: value for key, _, value in y.items(node)}
    if not y.is_string(node):
        return {}
    assert isinstance(node, yaml.ScalarNode)
    options: dict[str, yaml.Node] = {}
    raw: list[str] = []
    for word in _split_args(str(node.value)):
        key, is_pair, value = word.partition("=")
        if is_pair and key in known:
            options[key] = yaml.ScalarNode(_STR, _unquote(value), node.start_mark, node.end_mark)
        else:
            raw.append(word)
    if raw:
        options["_raw_params"] = yaml.ScalarNode(
            _STR, " ".join(raw), node.start_mark, node.end_mark
        )
    return options


def _key_values(text: str) -> list[tuple[str, str]]:
    """The `k=v` pairs of `set_fact`'s string form; a word whose key is not a name
    (nor a template of one) is ignored."""
    pairs = []
    for word in _split_args(text):
        key, is_pair, value = word.partition("=")
        if is_pair and (
            _IDENTIFIER.fullmatch(key) or (key.startswith("{{") and key.endswith("}}"))
        ):
            pairs.append((key, _unquote(value)))
    return pairs


def _split_args(text: str) -> list[str]:
    """The words of `a=1 b="x y" c={{ d | default('e f') }}`: split at whitespace outside
    quotes and templates, as ansible-core splits them; [] when a quote or a template is
    left open (ansible-core refuses the task then)."""
    words: list[str] = []
    word = ""
    quote: str | None = None
    depth = 0  # of open `{{`, `{%`, `{#`
    index = 0
    while index < len(text):
        char, pair = text[index], text[index : index + 2]
        if quote is not None:
            if char == quote and not word.endswith("\\"):
                quote = None
        elif pair in ("{{", "{%", "{#") or (depth and pair in ("}}", "%}", "#}")):
            depth += 1 if char == "{" else -1
            word += pair
            index += 2
            continue
        elif char in "'\"":
            quote = char
        elif char.isspace() and depth == 0:
            if word:
                words.append(word)
            word = ""
            index += 1
            continue
        word += char
        index += 1
    if quote is not None or depth:
        return []
    return [*words, word] if word else words


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _text(node: yaml.Node | None) -> str | None:
    return str(node.value) if y.is_string(node) else None  # type: ignore[union-attr]


def _templated(text: str) -> bool:
    return "{{" in text or "{%" in text


# -- finding files as ansible-core does ----------------------------------------------------------


def _vars_candidates(source: str, at: _At) -> list[Path]:
    """Where include_vars looks for `file:`: in the role, then beside the task file, then
    in the playbook's directory; in a `vars/` folder of each first (path_dwim_relative_stack)."""
    path = Path(source).expanduser()
    if path.is_absolute():
        return [path]
    candidates = []
    for base in (at.role, at.file.parent, at.base):
        if base is None:
            continue
        if path.parts[:1] != ("vars",):
            candidates.append(base / "vars" / path)
        candidates.append(base / path)
    return candidates


def _include_vars_dir(source: str, at: _At) -> list[Path] | None:
    """The files include_vars reads for `dir:` (every one with a vars suffix: filters
    such as files_matching are not applied, listing more is the safe side); None when
    the folder is not there."""
    path = Path(source).expanduser()
    if at.role is None:
        folder = at.file.parent / path
    elif path.parts[:1] == ("vars",):
        folder = at.role / path
    else:
        folder = at.role / "vars" / path
    if not folder.is_dir():
        return None
    return sorted(
        file for file in folder.rglob("*") if file.suffix in _VARS_SUFFIXES and file.is_file()
    )


def _vars_from_files(wanted: Path) -> list[Path]:
    for candidate in (wanted, *(Path(f"{wanted}{suffix}") for suffix in _VARS_SUFFIXES)):
        if candidate.is_file():
            return [candidate]
    return _vars_files_under(wanted)


def _vars_files_under(folder: Path) -> list[Path]:
    """The files of group_vars/host_vars: `all.yml`, `all` (no suffix), `all/x.yml`."""
    if not folder.is_dir():
        return []
    return sorted(
        file
        for file in folder.rglob("*")
        if file.is_file() and file.suffix in ("", *_VARS_SUFFIXES) and not file.name.startswith(".")
    )


def _main_first(files: Iterable[Path]) -> list[Path]:
    return sorted(files, key=lambda path: (path.stem != "main", str(path)))


def _compose(path: Path) -> yaml.Node | None:
    try:
        return y.compose_file(path)
    except (OSError, ValueError, yaml.YAMLError):
        return None  # loading the role with Ansible reports it
