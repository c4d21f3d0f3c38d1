"""What `ansible-operator check` adds for the roles and playbooks webhooks run.

A webhook run's variables are all known, unlike a reconcile's (whose come from the
object's spec): `admission` (the request, with fixed keys), `ansible_operator_meta`, the
webhook's `vars`, and what the role itself defines (defaults, vars, `set_fact`,
`register`, `vars:`, loop variables). So a name none of those defines, used where it is not
guarded (`is defined`, `| default`), fails the run: a typo, reported as an error. And a
webhook whose tasks never call `admission_response` answers nothing: every request gets its
failurePolicy.

Where the variables cannot all be known (`include_vars`, `vars_files`, inventory
`group_vars`/`host_vars`, a role a watch runs too), names are not checked.
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import jinja2
import yaml
from jinja2 import meta, nodes

from ansible_operator.lint import yaml_nodes as y
from ansible_operator.lint.findings import Finding, error, warning
from ansible_operator.lint.jinja_types import Inferred, literal_type
from ansible_operator.lint.project import role_files, roles_reached, roles_used_by_playbook
from ansible_operator.project.webhook_entries import Webhook

__all__ = ["ADMISSION_KEYS", "answer_findings", "undefined_name_findings", "webhook_variables"]

# The keys of `admission` (webhooks/review.py `admission_vars`; a test keeps them equal).
ADMISSION_KEYS = frozenset(
    {
        "uid",
        "operation",
        "kind",
        "resource",
        "sub_resource",
        "namespace",
        "name",
        "object",
        "old_object",
        "user_info",
        "dry_run",
        "options",
        "webhook",
    }
)
META_KEYS = frozenset({"name", "namespace"})
FIXED_KEYS = {"admission": ADMISSION_KEYS, "ansible_operator_meta": META_KEYS}
# What every mapping has in a template.
MAPPING_METHODS = frozenset({"get", "items", "keys", "values"})
# Ansible's own variables and Jinja's globals: defined in every run.
ALWAYS_DEFINED = frozenset(
    {
        "hostvars",
        "groups",
        "group_names",
        "inventory_hostname",
        "inventory_hostname_short",
        "inventory_dir",
        "inventory_file",
        "playbook_dir",
        "play_hosts",
        "role_name",
        "role_names",
        "role_path",
        "omit",
        "item",
        "vars",
        "environment",
        "lookup",
        "query",
        "q",
        "now",
        "undef",
        "range",
        "lipsum",
        "dict",
        "cycler",
        "joiner",
        "namespace",
        "true",
        "false",
        "none",
        "True",
        "False",
        "None",
    }
)
CONDITIONALS = ("when", "failed_when", "changed_when", "until")
ASSERTS = {f"{p}assert" for p in ("", "ansible.builtin.", "ansible.legacy.")}
SET_FACT = {f"{p}{m}" for p in ("", "ansible.builtin.", "ansible.legacy.") for m in ("set_fact",)}
UNKNOWN_SOURCES = {
    f"{p}{m}" for p in ("", "ansible.builtin.", "ansible.legacy.") for m in ("include_vars",)
} | {"vars_files", "vars_prompt"}
INCLUDES = {
    f"{p}{m}"
    for p in ("", "ansible.builtin.", "ansible.legacy.")
    for m in ("include_tasks", "import_tasks", "import_playbook", "include")
}
ANSWER = "admission_response"


class _AnyPlugin(dict[str, object]):
    """Every filter and test name exists: finding names compiles the template, and the
    collections' filters (`b64encode`, `k8s_config_resource_name`...) are not Jinja's."""

    def get(self, _name: str, _default: object = None) -> object:  # type: ignore[override]
        return len

    def __contains__(self, _name: object) -> bool:
        return True


_environment = jinja2.Environment(extensions=["jinja2.ext.loopcontrols", "jinja2.ext.do"])
_environment.filters = _AnyPlugin()  # type: ignore[assignment]
_environment.tests = _AnyPlugin()  # type: ignore[assignment]


def webhook_variables(webhooks: Iterable[Webhook]) -> dict[str, Inferred]:
    """What the templating checker knows of a webhook run's variables."""
    known: dict[str, Inferred] = {
        "admission": literal_type({}, "`admission`"),
        "ansible_operator_meta": literal_type({}, "`ansible_operator_meta`"),
    }
    for webhook in webhooks:
        for name, value in webhook.vars.items():
            known[name] = literal_type(value, f"the webhook's variable `{name}`")
    return known


def _source(webhook: Webhook) -> tuple[str, int]:
    path, _, line = webhook.source.rpartition(":")
    return (path, int(line)) if line.isdigit() else (webhook.source, 1)


def _compose(path: Path) -> yaml.Node | None:
    try:
        return y.compose_file(path)
    except (OSError, yaml.YAMLError):
        return None  # reported when Ansible loads it


# -- does it answer? --------------------------------------------------------------------


def answer_findings(
    target: Path, webhooks: list[Webhook], directory: Path, env: Mapping[str, str]
) -> list[Finding]:
    """A warning at each webhook entry whose role or playbook never answers."""
    if target.is_dir():
        files = _role_task_files(roles_reached([target], directory, env))
    else:
        files = _playbook_files(target)
        if files is None:
            return []  # includes a file named by a template: cannot tell
        used = roles_used_by_playbook(target, directory, env)
        files += _role_task_files(roles_reached(used, directory, env))
    if any(_answers(_compose(path)) for path in files):
        return []
    return [
        warning(
            *_source(webhook),
            f"webhook {webhook.name}: {target.name} never calls "
            f"operator_sdk.util.{ANSWER}, so it answers nothing: every request gets the "
            f"failurePolicy ({webhook.failure_policy})",
        )
        for webhook in webhooks
    ]


def _role_task_files(roles: list[Path]) -> list[Path]:
    return [
        path for role in roles for path in role_files(role, "tasks") + role_files(role, "handlers")
    ]


def _playbook_files(playbook: Path) -> list[Path] | None:
    """The playbook and the task files and playbooks it includes; None when one is named
    by a template."""
    files, queue = [], [playbook]
    while queue:
        path = queue.pop()
        if path in files:
            continue
        files.append(path)
        for key, value in _mapping_items(_compose(path)):
            if key not in INCLUDES:
                continue
            name = y.get(value, "file") if isinstance(value, yaml.MappingNode) else value
            if not isinstance(name, yaml.ScalarNode) or "{{" in str(name.value):
                return None
            queue.append((path.parent / str(name.value)).resolve())
    return files


def _mapping_items(node: yaml.Node | None) -> Iterator[tuple[str, yaml.Node]]:
    """Every (key, value) of every mapping under `node`."""
    if isinstance(node, yaml.SequenceNode):
        for child in node.value:
            yield from _mapping_items(child)
    elif isinstance(node, yaml.MappingNode):
        for key, _, value in y.items(node):
            yield key, value
            yield from _mapping_items(value)


def _answers(root: yaml.Node | None) -> bool:
    return any(key == ANSWER or key.endswith(f".{ANSWER}") for key, _ in _mapping_items(root))


# -- undefined names --------------------------------------------------------------------


def undefined_name_findings(
    target: Path, webhooks: list[Webhook], directory: Path, env: Mapping[str, str]
) -> list[Finding]:
    """Errors for the names a webhook's own role or playbook uses and nothing defines."""
    if target.is_dir():
        files = _role_files(target)
        used = roles_reached([target], directory, env)[1:]
        inventories = [directory]
    else:
        files = [target]
        used = roles_reached(roles_used_by_playbook(target, directory, env), directory, env)
        inventories = [directory, target.parent]
    if any((place / d).is_dir() for place in inventories for d in ("group_vars", "host_vars")):
        return []
    roots = {path: _compose(path) for path in files}
    # What the roles it uses define is visible too (defaults, vars, facts they set).
    others = {path: _compose(path) for role in used for path in _role_files(role)}
    defined = set(ALWAYS_DEFINED) | set(FIXED_KEYS)
    for webhook in webhooks:
        defined |= set(webhook.vars)
    variable_files = {path for role in [*used, target] for path in _variable_files(role)}
    for path, root in (roots | others).items():
        if path in variable_files:
            defined |= {name for name, _, _ in y.items(root)}
        names = _defined_in(root)
        if names is None:
            return []
        defined |= names
    guarded: set[str] = set()
    templates = [
        (path, node, text) for path, root in roots.items() for node, text in _templates(root)
    ]
    parsed = [(path, node, tree) for path, node, text in templates if (tree := _parse(text))]
    for _, _, tree in parsed:
        guarded |= _guarded(tree)
    # A role that sets `admission` itself: its keys are its own.
    fixed = {name: keys for name, keys in FIXED_KEYS.items() if name not in _set_by_role(roots)}
    findings: list[Finding] = []
    what = ", ".join(sorted({w.name for w in webhooks}))
    for path, node, tree in parsed:
        for name in sorted(meta.find_undeclared_variables(tree)):
            if name in defined or name in guarded or name.startswith("ansible_"):
                continue
            findings.append(
                error(
                    path,
                    y.line_of(node),
                    f"`{name}` is not defined in a run of webhook {what}"
                    f"{_did_you_mean(name, defined)} (its variables: admission, "
                    "ansible_operator_meta, the webhook's vars and what the role defines)",
                )
            )
        for variable, key in _fixed_keys_used(tree, fixed):
            findings.append(
                error(
                    path,
                    y.line_of(node),
                    f"`{variable}` has no key `{key}`"
                    f"{_did_you_mean(key, fixed[variable])} (its keys: "
                    f"{', '.join(sorted(fixed[variable]))})",
                )
            )
    return findings


def _variable_files(role: Path) -> list[Path]:
    if not role.is_dir():
        return []
    return role_files(role, "defaults") + role_files(role, "vars")


def _role_files(role: Path) -> list[Path]:
    return _variable_files(role) + role_files(role, "tasks") + role_files(role, "handlers")


def _did_you_mean(name: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, sorted(choices), n=1)
    return f" (did you mean `{close[0]}`?)" if close else ""


def _defined_in(root: yaml.Node | None) -> set[str] | None:
    """Names a task file or playbook defines; None when it reads variables from elsewhere."""
    names: set[str] = set()
    for key, value in _mapping_items(root):
        if key in UNKNOWN_SOURCES:
            return None
        if key in SET_FACT and isinstance(value, yaml.ScalarNode):  # set_fact: a=1 b=2
            names |= {part.split("=")[0] for part in str(value.value).split() if "=" in part}
        elif key in SET_FACT or key == "vars":
            names |= {name for name, _, _ in y.items(value)}
        elif key in ("register", "loop_var", "index_var") and isinstance(value, yaml.ScalarNode):
            names.add(str(value.value))
    return names


def _set_by_role(roots: Mapping[Path, yaml.Node | None]) -> set[str]:
    return {name for root in roots.values() for name in _defined_in(root) or set()}


def _templates(node: yaml.Node | None, bare: bool = False) -> Iterator[tuple[yaml.Node, str]]:
    """Each templated string under `node` as a template: `{{ }}` text, and conditionals
    (bare expressions: `when`, `assert`'s `that`...) wrapped as one."""
    if isinstance(node, yaml.ScalarNode):
        text = str(node.value)
        if not y.is_string(node):
            return
        if bare:
            yield node, "{{ " + text + " }}"
        elif "{{" in text or "{%" in text:
            yield node, text
    elif isinstance(node, yaml.SequenceNode):
        for child in node.value:
            yield from _templates(child, bare)
    elif isinstance(node, yaml.MappingNode):
        for key, _, value in y.items(node):
            if key in ASSERTS and isinstance(value, yaml.MappingNode):
                for inner, _, inner_value in y.items(value):
                    yield from _templates(inner_value, inner == "that")
            else:
                yield from _templates(value, key in CONDITIONALS)


def _parse(text: str) -> nodes.Template | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return _environment.parse(text)
    except jinja2.TemplateSyntaxError:
        return None  # the templating checker reports it


def _guarded(tree: nodes.Node) -> set[str]:
    """Names tested with `is defined`/`is undefined`, or given a `default`."""
    names: set[str] = set()
    for test in tree.find_all(nodes.Test):
        if test.name in ("defined", "undefined"):
            names |= {n.name for n in test.node.find_all(nodes.Name)}
            if isinstance(test.node, nodes.Name):
                names.add(test.node.name)
    for filtered in tree.find_all(nodes.Filter):
        if filtered.name in ("default", "d") and filtered.node is not None:
            names |= {n.name for n in filtered.node.find_all(nodes.Name)}
            if isinstance(filtered.node, nodes.Name):
                names.add(filtered.node.name)
    return names


def _fixed_keys_used(
    tree: nodes.Node, fixed: Mapping[str, frozenset[str]]
) -> Iterator[tuple[str, str]]:
    """(variable, key) for `admission.objet` or `admission['objet']`: a key it never has."""
    for node in tree.find_all((nodes.Getattr, nodes.Getitem)):
        if not isinstance(node.node, nodes.Name) or node.node.name not in fixed:
            continue
        if isinstance(node, nodes.Getattr):
            key = node.attr
        elif isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str):
            key = node.arg.value
        else:
            continue
        keys = fixed[node.node.name]
        if key not in keys and key not in MAPPING_METHODS:
            yield node.node.name, key
