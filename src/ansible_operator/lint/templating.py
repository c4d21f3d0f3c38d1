"""The ansible-core 2.18 -> 2.19 templating changes that break existing roles,
found in task files, playbooks and variable files without running them.

What 2.19 changed (its porting guide) and what is checked here:
- conditionals (`when`, `failed_when`, `changed_when`, `until`, `assert`'s
  `that`) must be strings (or booleans) whose result is a boolean: a string,
  number, list or mapping result fails the task; `{{ }}` inside a conditional
  is a syntax error, around the whole of it deprecated;
- a template's result keeps its native type: `"{{ (x | int) + 1 }}"` is now an
  int where 2.18 rendered the string "2", which the API server rejects where
  Kubernetes wants a string (ConfigMap data, labels, annotations, env values);
- no literal evaluation of rendered text: `"[{{ a }}, {{ b }}]"` stays a
  string, and a string-valued lookup given to `loop` is not a list any more;
- `omit` is applied where it appears: a loop item's key set to `{{ omit }}` is
  dropped from the item, an omitted list element is dropped from the list, and
  `omit` inside a longer string renders as '';
- a template that renders nothing (`{% if x %}...{% endif %}`) is None, not ''.
Mapping keys are never templated (in 2.18 neither): `"{{ name }}": value` in a
module's arguments keeps the braces, which is always a mistake.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import jinja2
import yaml
from jinja2 import nodes

from ansible_operator.lint import yaml_nodes as y
from ansible_operator.lint.findings import Finding, error, warning
from ansible_operator.lint.jinja_types import (
    BOOL,
    NUMBER,
    STRING,
    Inferred,
    Scope,
    infer,
    literal_type,
    parse_expression,
    parse_template,
    single_expression,
    uses_name,
)

__all__ = ["TaskChecker", "registered_names", "variables_of"]

CONDITIONALS = ("when", "failed_when", "changed_when", "until")
LOOPS = ("loop", "with_items", "with_list")
BLOCK_KEYS = ("block", "rescue", "always")
PLAY_TASK_LISTS = ("pre_tasks", "tasks", "post_tasks", "handlers")
K8S_MODULES = {
    "k8s",
    "kubernetes.core.k8s",
    "community.kubernetes.k8s",
    "community.okd.k8s",
    "redhat.openshift.k8s",
}
# modules whose argument keys are templated (they name variables)
KEYS_TEMPLATED = {"set_fact", "set_stats", "include_vars"}
CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")
METADATA_STRINGS = ("name", "namespace", "generateName")
METADATA_MAPS = ("labels", "annotations")
SELECTOR_MAPS = ("matchLabels", "nodeSelector")
_ALWAYS_BOOLEAN = "compare or test explicitly, e.g. `x | length > 0`, `x is truthy`, `x | bool`"


def _short(action: str) -> str:
    for prefix in ("ansible.builtin.", "ansible.legacy."):
        if action.startswith(prefix):
            return action[len(prefix) :]
    return action


def _has_template(text: str) -> bool:
    return "{{" in text or "{%" in text


def _a(kind: str) -> str:
    return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"


@dataclass
class TaskChecker:
    """Checks the tasks, plays and variables of one file."""

    path: Path
    keywords: frozenset[str]
    scope: Scope = field(default_factory=Scope)
    findings: list[Finding] = field(default_factory=list)

    def error(self, node: yaml.Node, message: str) -> None:
        self.findings.append(error(self.path, y.line_of(node), message))

    def warning(self, node: yaml.Node, message: str) -> None:
        self.findings.append(warning(self.path, y.line_of(node), message))

    # -- files ----------------------------------------------------------------------------

    def task_file(self, root: yaml.Node | None) -> None:
        self.tasks(root)

    def playbook(self, root: yaml.Node | None) -> None:
        if not isinstance(root, yaml.SequenceNode):
            return
        for play in root.value:
            scope = self.scope
            play_vars = y.get(play, "vars")
            if play_vars is not None:
                self.variables(play_vars)
                self.scope = _with_variables(scope, play_vars)
            for key, _, value in y.items(play):
                if key in PLAY_TASK_LISTS:
                    self.tasks(value)
                elif key == "roles" and isinstance(value, yaml.SequenceNode):
                    for role in value.value:
                        self.keywords_of(role)
            self.scope = scope

    def variables(self, root: yaml.Node | None) -> None:
        """A `vars:` mapping or a defaults/vars file: values built as text."""
        for _, _, value in y.items(root):
            self.values(value, in_list=False)

    # -- tasks ----------------------------------------------------------------------------

    def tasks(self, node: yaml.Node | None) -> None:
        if not isinstance(node, yaml.SequenceNode):
            return
        for task in node.value:
            if not isinstance(task, yaml.MappingNode):
                continue
            scope = self.scope
            task_vars = y.get(task, "vars")
            if task_vars is not None:
                self.variables(task_vars)
                self.scope = _with_variables(scope, task_vars)
            if any(y.get(task, key) is not None for key in BLOCK_KEYS):
                self.keywords_of(task)
                for key in BLOCK_KEYS:
                    self.tasks(y.get(task, key))
            else:
                self.task(task)
            self.scope = scope

    def keywords_of(self, node: yaml.Node) -> None:
        for key in CONDITIONALS:
            found = y.get(node, key)
            if found is not None:
                self.conditional(found, key)

    def task(self, task: yaml.MappingNode) -> None:
        self.keywords_of(task)
        action, arguments = self.action_of(task)
        if arguments is not None:
            self.arguments(arguments, action)
        extra = y.get(task, "args")
        if extra is not None:
            self.arguments(extra, action)
        for key in LOOPS:
            loop = y.get(task, key)
            if loop is not None:
                self.loop(task, loop, key)

    def action_of(self, task: yaml.MappingNode) -> tuple[str, yaml.Node | None]:
        for key, _, value in y.items(task):
            if key not in self.keywords and not key.startswith("with_"):
                return key, value
        return "", None

    def arguments(self, arguments: yaml.Node, action: str) -> None:
        short = _short(action)
        if short == "assert":
            that = y.get(arguments, "that")
            if that is not None:
                self.conditional(that, "assert that")
        if action in K8S_MODULES:
            for key in ("definition", "resource_definition"):
                definition = y.get(arguments, key)
                resources = (
                    definition.value if isinstance(definition, yaml.SequenceNode) else [definition]
                )
                for resource in resources:
                    if isinstance(resource, yaml.MappingNode):
                        self.resource(resource)
        self.values(arguments, in_list=False, keys_templated=short in KEYS_TEMPLATED)

    # -- conditionals -----------------------------------------------------------------------

    def conditional(self, node: yaml.Node, keyword: str) -> None:
        if isinstance(node, yaml.SequenceNode):
            for child in node.value:
                if isinstance(child, yaml.SequenceNode):
                    self.error(child, f"`{keyword}`: a list inside the list of conditions")
                else:
                    self.conditional(child, keyword)
            return
        if isinstance(node, yaml.MappingNode):
            self.error(
                node,
                f"`{keyword}` is a mapping, not an expression: YAML reads `a: b` (a colon "
                "and a space) as a mapping, and ansible-core 2.19+ fails with "
                "'Conditional expressions must be strings'; quote the whole expression",
            )
            return
        if not y.is_string(node):
            value = y.scalar(node)  # type: ignore[arg-type]
            if value is not None and not isinstance(value, bool):
                kind = literal_type(value, "it").types
                self.error(
                    node,
                    f"`{keyword}: {node.value}` is {_a(min(kind))}, not an expression: "
                    "ansible-core 2.19+ fails with 'Conditional expressions must be "
                    f"strings'; {_ALWAYS_BOOLEAN}",
                )
            return
        self.conditional_text(node, keyword)

    def conditional_text(self, node: yaml.ScalarNode, keyword: str) -> None:
        text = node.value.strip()
        expression = self._whole_template(text) if _has_template(text) else None
        if expression is not None:
            self.warning(
                node,
                f"`{keyword}` is wrapped in `{{{{ }}}}`: deprecated in ansible-core 2.19, an "
                f"error from 2.23; write `{keyword}: {text[2:-2].strip()}`",
            )
        else:
            try:
                expression = parse_expression(text)
            except jinja2.TemplateSyntaxError as failure:
                if _has_template(text):
                    self.error(
                        node,
                        f"`{keyword}` has `{{{{ }}}}` inside the expression: ansible-core 2.19+ "
                        "fails with 'Syntax error in expression. Template delimiters are not "
                        "supported in expressions'; use the variables directly "
                        "(`a == b`, not `a == {{ b }}`)",
                    )
                else:
                    self.error(node, f"`{keyword}`: syntax error in `{text}`: {failure.message}")
                return
            if _embeds_templates(expression):
                self.warning(
                    node,
                    f"`{keyword}` has a template inside a string: deprecated in ansible-core "
                    "2.19 (a later release refuses it); use the variable directly "
                    "(`a == b`, not `a == '{{ b }}'`)",
                )
        result = infer(expression, self.scope)
        if result.may_be_other_than(BOOL):
            verb = "may not give" if BOOL in result.types or not result.certain else "does not give"
            self.error(
                node,
                f"`{keyword}: {text}` {verb} a boolean ({result.why}): ansible-core "
                f"2.19+ fails conditionals whose result is not a boolean; {_ALWAYS_BOOLEAN}",
            )

    def _whole_template(self, text: str) -> nodes.Expr | None:
        """The expression of `{{ expression }}` (the whole text), else None."""
        try:
            template = parse_template(text)
        except jinja2.TemplateSyntaxError:
            return None
        expression = single_expression(template)
        if expression is None or not (text.startswith("{{") and text.endswith("}}")):
            return None
        return expression

    # -- loops ------------------------------------------------------------------------------

    def loop(self, task: yaml.MappingNode, loop: yaml.Node, keyword: str) -> None:
        if isinstance(loop, yaml.SequenceNode):
            self.omitted_item_keys(task, loop)
            return
        if not y.is_string(loop) or not _has_template(loop.value):
            return
        expression = self._whole_template(loop.value.strip())
        if expression is None:
            return
        result = infer(expression, self.scope)
        if result.only(STRING):
            self.error(
                loop,
                f"`{keyword}` needs a list, but {result.why}: ansible-core 2.18 turned "
                "list-like text into a list, 2.19+ does not; parse it "
                "(`| from_json`, `| from_yaml`) or use `query(...)`",
            )

    def omitted_item_keys(self, task: yaml.MappingNode, loop: yaml.SequenceNode) -> None:
        """`loop: [{msg: "{{ omit }}"}]` with `item.msg` in the task: 2.19 drops
        the key from the item, so `item.msg` is undefined."""
        used = [
            scalar
            for key, _, value in y.items(task)
            if key not in LOOPS
            for scalar in y.strings(value)
        ]
        for item in loop.value:
            for key, _, value in y.items(item):
                if not (y.is_string(value) and _uses_omit(value.value)):
                    continue
                pattern = re.compile(
                    rf"\bitem(\.{re.escape(key)}\b|\[['\"]{re.escape(key)}['\"]\])"
                    r"(?!\s*\|\s*(default|d)\b)"
                )
                for scalar in used:
                    if pattern.search(scalar.value):
                        self.error(
                            value,
                            f"loop item key `{key}` is `omit`: ansible-core 2.19+ drops it from "
                            f"the item, so `item.{key}` (line {y.line_of(scalar)}) is "
                            f"undefined; write `item.{key} | default(omit)` there",
                        )
                        break

    # -- values -----------------------------------------------------------------------------

    def values(
        self, node: yaml.Node | None, *, in_list: bool, keys_templated: bool = False
    ) -> None:
        if node is None:
            return
        if y.is_string(node):
            self.value_text(node, in_list=in_list)  # type: ignore[arg-type]
        elif isinstance(node, yaml.SequenceNode):
            for child in node.value:
                self.values(child, in_list=True)
        elif isinstance(node, yaml.MappingNode):
            for key, key_node, value in y.items(node):
                if _has_template(key) and not keys_templated:
                    self.error(
                        key_node,
                        f"the key `{key}` is not templated (keys of a module's arguments "
                        "never are): it stays as written; build the mapping in one "
                        "expression, e.g. `{{ {name: value} }}`, or with `combine`",
                    )
                self.values(value, in_list=False)

    def value_text(self, node: yaml.ScalarNode, *, in_list: bool) -> None:
        text = node.value
        if not _has_template(text):
            return
        try:
            template = parse_template(text)
        except jinja2.TemplateSyntaxError as failure:
            self.error(node, f"template syntax error: {failure.message}")
            return
        expression = single_expression(template)
        if any(
            _embeds_templates(call) for call in template.find_all(nodes.Call) if _is_lookup(call)
        ):
            self.warning(
                node,
                "a template inside a lookup's argument: deprecated in ansible-core 2.19 (a "
                "later release refuses it); pass the variable: `lookup('pipe', 'echo ' ~ x)`",
            )
        if uses_name(template, "omit"):
            if expression is None:
                self.warning(
                    node,
                    "`omit` inside a longer string: ansible-core 2.19+ renders it as '' "
                    "(2.18 left a placeholder text); omit the whole value instead",
                )
            elif in_list:
                self.warning(
                    node,
                    "`omit` as a list element: ansible-core 2.19+ drops the element "
                    "(2.18 kept a placeholder string in the list)",
                )
        stripped = text.lstrip()
        if (
            expression is None
            and stripped[:1] in ("[", "{")
            and not stripped.startswith(("{{", "{%", "{#"))
        ):
            kind = "list" if stripped[0] == "[" else "mapping"
            self.warning(
                node,
                f"a {kind} written as text around templates: ansible-core 2.18 read the "
                f"rendered text as a {kind}, 2.19+ keeps it a string; write one "
                "expression instead (e.g. `{{ [a, b] }}`)",
            )
        if _renders_nothing_sometimes(template):
            self.warning(
                node,
                "this template renders nothing when its `if` is false: ansible-core 2.19+ "
                "gives None there (2.18 gave ''); add `{% else %}{{ '' }}`",
            )

    # -- Kubernetes objects -----------------------------------------------------------------

    def resource(self, resource: yaml.MappingNode) -> None:
        kind_node = y.get(resource, "kind")
        kind = str(kind_node.value) if isinstance(kind_node, yaml.ScalarNode) else "object"
        if kind in ("ConfigMap", "Secret"):
            for key in ("data", "stringData"):
                for name, _, value in y.items(y.get(resource, key)):
                    self.string_field(value, f"{kind} {key}.{name}")
        self.string_fields(resource, kind)

    def string_fields(self, node: yaml.Node, kind: str, parent: str = "") -> None:
        """Fields Kubernetes types as strings, wherever they are in the object."""
        for key, _, value in y.items(node):
            if key in METADATA_STRINGS and parent == "metadata":
                self.string_field(value, f"{kind} metadata.{key}")
            if key in SELECTOR_MAPS or (key in METADATA_MAPS and parent == "metadata"):
                for name, _, entry in y.items(value):
                    self.string_field(entry, f"{kind} {key}.{name}")
            if key in CONTAINER_LISTS and isinstance(value, yaml.SequenceNode):
                for container in value.value:
                    self.container(container, kind)
            if isinstance(value, yaml.MappingNode):
                self.string_fields(value, kind, key)
            elif isinstance(value, yaml.SequenceNode):
                for child in value.value:
                    self.string_fields(child, kind, key)

    def container(self, container: yaml.Node, kind: str) -> None:
        for field_name in ("image", "workingDir"):
            found = y.get(container, field_name)
            if found is not None:
                self.string_field(found, f"{kind} container {field_name}")
        for field_name in ("command", "args"):
            found = y.get(container, field_name)
            if isinstance(found, yaml.SequenceNode):
                for entry in found.value:
                    self.string_field(entry, f"{kind} container {field_name} entry")
        env = y.get(container, "env")
        for variable in env.value if isinstance(env, yaml.SequenceNode) else []:
            value = y.get(variable, "value")
            name = y.get(variable, "name")
            label = name.value if isinstance(name, yaml.ScalarNode) else "?"
            if value is not None:
                self.string_field(value, f"{kind} env {label}")

    def string_field(self, node: yaml.Node, where: str) -> None:
        if isinstance(node, yaml.ScalarNode) and not y.is_string(node):
            value = y.scalar(node)
            if isinstance(value, bool | int | float):
                kind = "boolean" if isinstance(value, bool) else "number"
                self.error(
                    node,
                    f"{where} is {_a(kind)} ({node.value}): Kubernetes accepts only a "
                    "string here; quote it",
                )
            return
        if not y.is_string(node) or not _has_template(node.value):
            return
        text = node.value.strip()
        expression = self._whole_template(text)
        if expression is None:
            return
        result = infer(expression, self.scope)
        inner = text[2:-2].strip()
        if not isinstance(expression, nodes.Filter):
            inner = f"({inner})"
        if result.only(NUMBER) and not isinstance(expression, nodes.Name):
            self.error(
                node,
                f"{where}: `{text}` gives a number in ansible-core 2.19+ (2.18 rendered "
                f"it as a string), which the API server rejects here; add `| string`: "
                f"`{{{{ {inner} | string }}}}`",
            )
        elif result.only(NUMBER, BOOL):
            kind = "number" if NUMBER in result.types else "boolean"
            self.error(
                node,
                f"{where}: `{text}` gives {_a(kind)} ({result.why or 'its value'}), which "
                "the API server rejects here; add `| string`",
            )


def _embeds_templates(node: nodes.Node) -> bool:
    """A string constant in the expression holds `{{ }}` or `{% %}`."""
    return any(
        isinstance(const.value, str) and _has_template(const.value)
        for const in node.find_all(nodes.Const)
    )


def _is_lookup(call: nodes.Call) -> bool:
    return isinstance(call.node, nodes.Name) and call.node.name in ("lookup", "query", "q")


def _uses_omit(text: str) -> bool:
    if "omit" not in text or not _has_template(text):
        return False
    try:
        return uses_name(parse_template(text), "omit")
    except jinja2.TemplateSyntaxError:
        return False


def _renders_nothing_sometimes(template: nodes.Template) -> bool:
    """The whole template is one `{% if %}` without `{% else %}`."""
    body = [
        node
        for node in template.body
        if not (
            isinstance(node, nodes.Output)
            and all(isinstance(n, nodes.TemplateData) and not n.data.strip() for n in node.nodes)
        )
    ]
    return (
        len(body) == 1 and isinstance(body[0], nodes.If) and not body[0].else_ and not body[0].elif_
    )


def _with_variables(scope: Scope, mapping: yaml.Node) -> Scope:
    return replace(scope, variables={**scope.variables, **variables_of(mapping)})


def variables_of(mapping: yaml.Node | None) -> dict[str, Inferred]:
    """Types of the variables a `vars:` mapping or defaults/vars file defines."""
    found: dict[str, Inferred] = {}
    for name, _, value in y.items(mapping):
        if isinstance(value, yaml.ScalarNode):
            found[name] = literal_type(y.scalar(value), f"variable `{name}`")
        elif isinstance(value, yaml.SequenceNode):
            found[name] = literal_type([], f"variable `{name}`")
        elif isinstance(value, yaml.MappingNode):
            found[name] = literal_type({}, f"variable `{name}`")
    return found


def registered_names(node: yaml.Node | None) -> Iterator[str]:
    """Every `register:` name in a task list or playbook."""
    if isinstance(node, yaml.SequenceNode):
        for child in node.value:
            yield from registered_names(child)
    elif isinstance(node, yaml.MappingNode):
        for key, _, value in y.items(node):
            if key == "register" and isinstance(value, yaml.ScalarNode):
                yield str(value.value)
            elif key in (*BLOCK_KEYS, *PLAY_TASK_LISTS):
                yield from registered_names(value)
