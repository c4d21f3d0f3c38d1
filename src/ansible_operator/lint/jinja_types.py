"""What a Jinja expression yields, worked out from its syntax alone.

ansible-core 2.19 keeps the native type of a template's result (`{{ n | int + 1 }}`
is an int, where 2.18 gave the string "2") and fails conditionals whose result is
not a boolean. Both depend on the type an expression yields, which is often
plain from its syntax: `| length` is a number, `x is defined` a boolean, `a ~ b`
a string. Where it is not (a variable whose value comes from the object's spec),
the answer is "unknown" and nothing is reported.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field

import jinja2
from jinja2 import nodes
from jinja2.parser import Parser

__all__ = [
    "BOOL",
    "DICT",
    "LIST",
    "NONE",
    "NUMBER",
    "STRING",
    "UNKNOWN",
    "Inferred",
    "Scope",
    "describe",
    "infer",
    "parse_expression",
    "parse_template",
    "single_expression",
    "uses_name",
]

BOOL, NUMBER, STRING, LIST, DICT, NONE, UNKNOWN = (
    "boolean",
    "number",
    "string",
    "list",
    "mapping",
    "None",
    "unknown",
)

_environment = jinja2.Environment(extensions=["jinja2.ext.loopcontrols", "jinja2.ext.do"])


@dataclass(frozen=True)
class Inferred:
    """The types an expression may yield, and why the first definite one is so."""

    types: frozenset[str]
    why: str = ""

    @property
    def certain(self) -> bool:
        return UNKNOWN not in self.types

    def only(self, *types: str) -> bool:
        return self.certain and self.types <= set(types)

    def may_be_other_than(self, *types: str) -> bool:
        """A known type outside `types` is possible."""
        return bool(self.types - set(types) - {UNKNOWN})


def _of(kind: str, why: str = "") -> Inferred:
    return Inferred(frozenset({kind}), why)


_UNKNOWN = _of(UNKNOWN)


def _union(*parts: Inferred) -> Inferred:
    types = frozenset().union(*(p.types for p in parts))
    why = next((p.why for p in parts if p.why), "")
    return Inferred(types, why)


@dataclass
class Scope:
    """What is known about names: the types of variables defined in YAML (role
    defaults and vars, `vars:` of plays, blocks, tasks) and which names are
    registered task results."""

    variables: Mapping[str, Inferred] = field(default_factory=dict)
    registered: frozenset[str] = frozenset()


def parse_expression(text: str) -> nodes.Expr:
    """An expression as Ansible evaluates a conditional: the whole text, or a
    syntax error ("chunk after expression" for `1 == 2,`)."""
    with warnings.catch_warnings():
        # Jinja's lexer warns of escapes such as '\.' in regex strings; not ours to report
        warnings.simplefilter("ignore", DeprecationWarning)
        parser = Parser(_environment, text, state="variable")
        expression = parser.parse_expression()
    if not parser.stream.eos:
        token = parser.stream.current
        raise jinja2.TemplateSyntaxError(
            f"chunk after expression: {token.value!r}", token.lineno, None, None
        )
    return expression


def parse_template(text: str) -> nodes.Template:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return _environment.parse(text)


def single_expression(template: nodes.Template) -> nodes.Expr | None:
    """The expression of a template that is exactly `{{ expression }}`."""
    if len(template.body) != 1 or not isinstance(template.body[0], nodes.Output):
        return None
    parts = template.body[0].nodes
    if len(parts) != 1 or isinstance(parts[0], nodes.TemplateData):
        return None
    return parts[0]


def uses_name(node: nodes.Node, name: str) -> bool:
    return any(found.name == name for found in node.find_all(nodes.Name))


def describe(node: nodes.Node) -> str:
    """Short source-like text of an expression, for messages."""
    if isinstance(node, nodes.Name):
        return node.name
    if isinstance(node, nodes.Getattr):
        return f"{describe(node.node)}.{node.attr}"
    if isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const):
        return f"{describe(node.node)}[{node.arg.value!r}]"
    if isinstance(node, nodes.Filter) and node.node is not None:
        return f"{describe(node.node)} | {node.name}"
    if isinstance(node, nodes.Const):
        return repr(node.value)
    if isinstance(node, nodes.Call) and isinstance(node.node, nodes.Name | nodes.Getattr):
        return f"{describe(node.node)}(...)"
    return "the expression"


# -- filters, tests, methods and lookups whose result type does not depend on input ------

_NUMBER_FILTERS = {"int", "float", "length", "count", "abs", "round", "sum", "wordcount"}
_STRING_FILTERS = {
    "string",
    "to_json",
    "to_nice_json",
    "to_yaml",
    "to_nice_yaml",
    "join",
    "lower",
    "upper",
    "capitalize",
    "title",
    "trim",
    "replace",
    "regex_replace",
    "regex_escape",
    "b64encode",
    "b64decode",
    "quote",
    "basename",
    "dirname",
    "realpath",
    "expanduser",
    "hash",
    "checksum",
    "password_hash",
    "comment",
    "center",
    "indent",
    "truncate",
    "urlencode",
    "to_uuid",
    "strftime",
    "format",
    "escape",
    "e",
    "striptags",
    "wordwrap",
}
_LIST_FILTERS = {
    "list",
    "map",
    "select",
    "reject",
    "selectattr",
    "rejectattr",
    "sort",
    "unique",
    "union",
    "intersect",
    "difference",
    "symmetric_difference",
    "flatten",
    "dict2items",
    "zip",
    "zip_longest",
    "split",
    "batch",
    "slice",
    "product",
    "permutations",
    "combinations",
    "subelements",
    "items",
}
_DICT_FILTERS = {"dict", "combine", "items2dict"}
_PASSTHROUGH_FILTERS = {"mandatory", "unsafe"}
_BOOL_METHODS = {
    "startswith",
    "endswith",
    "isdigit",
    "isalpha",
    "isalnum",
    "islower",
    "isupper",
    "isspace",
}
_STRING_METHODS = {
    "lower",
    "upper",
    "strip",
    "lstrip",
    "rstrip",
    "replace",
    "format",
    "join",
    "title",
    "capitalize",
}
_LIST_METHODS = {"split", "splitlines", "keys", "values", "items"}
# lookup plugins whose result is one string (`query` always gives a list)
_STRING_LOOKUPS = {"file", "template", "env", "pipe", "password", "url", "ini", "csvfile"}
# what modules return under these keys of a registered result
_RESULT_KEYS = {
    "resources": (LIST, "a list (what k8s_info returns)"),
    "results": (LIST, "a list (one result per loop item)"),
    "stdout_lines": (LIST, "a list"),
    "stderr_lines": (LIST, "a list"),
    "files": (LIST, "a list"),
    "stdout": (STRING, "a string"),
    "stderr": (STRING, "a string"),
    "msg": (STRING, "a string"),
    "content": (STRING, "a string"),
    "rc": (NUMBER, "a number (the exit code)"),
    "status": (NUMBER, "a number (the HTTP status)"),
    "started": (NUMBER, "a number, 0 or 1: test it with `is started`"),
    "finished": (NUMBER, "a number, 0 or 1: test it with `is finished`"),
}


def _short(name: str) -> str:
    for prefix in ("ansible.builtin.", "ansible.legacy."):
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def infer(node: nodes.Node, scope: Scope | None = None, depth: int = 0) -> Inferred:
    """The types `node` may yield."""
    scope = scope or Scope()

    def again(child: nodes.Node | None) -> Inferred:
        return _UNKNOWN if child is None else infer(child, scope, depth + 1)

    if depth > 50:
        return _UNKNOWN
    if isinstance(node, nodes.Const):
        value = node.value
        if isinstance(value, bool):
            return _of(BOOL)
        if isinstance(value, int | float):
            return _of(NUMBER, f"{value!r} is a number")
        if isinstance(value, str):
            return _of(STRING, f"{value!r} is a string")
        if value is None:
            return _of(NONE, "none is None")
        if isinstance(value, tuple):
            return _of(LIST, "a trailing comma makes a tuple")
        return _UNKNOWN
    if isinstance(node, nodes.Compare | nodes.Test | nodes.Not):
        return _of(BOOL)
    if isinstance(node, nodes.And | nodes.Or):
        # Jinja's `and`/`or` yield one of their operands, not a boolean
        return _union(again(node.left), again(node.right))
    if isinstance(node, nodes.Concat):
        return _of(STRING, "`~` joins into a string")
    if isinstance(node, nodes.List | nodes.Tuple):
        return _of(LIST, "a list")
    if isinstance(node, nodes.Dict):
        return _of(DICT, "a mapping")
    if isinstance(node, nodes.CondExpr):
        return _union(again(node.expr1), again(node.expr2))
    if isinstance(node, nodes.Neg | nodes.Pos | nodes.Sub | nodes.Div | nodes.FloorDiv | nodes.Pow):
        return _of(NUMBER, "arithmetic gives a number")
    if isinstance(node, nodes.Add | nodes.Mul | nodes.Mod):
        return _arithmetic(node, again(node.left), again(node.right))
    if isinstance(node, nodes.Filter):
        return _filter(node, again)
    if isinstance(node, nodes.Call):
        return _call(node)
    if isinstance(node, nodes.Name):
        known = scope.variables.get(node.name)
        return known if known is not None else _UNKNOWN
    if isinstance(node, nodes.Getattr | nodes.Getitem):
        return _result_key(node, scope)
    return _UNKNOWN


def _arithmetic(node: nodes.BinExpr, left: Inferred, right: Inferred) -> Inferred:
    both = left.types | right.types
    if STRING in both and (isinstance(node, nodes.Add | nodes.Mul) or STRING in left.types):
        return _of(STRING, "a string")
    if LIST in both and isinstance(node, nodes.Add | nodes.Mul):
        return _of(LIST, "a list")
    if NUMBER in both:
        return _of(NUMBER, "arithmetic gives a number")
    return _UNKNOWN


def _filter(node: nodes.Filter, again) -> Inferred:  # type: ignore[no-untyped-def]
    name = _short(node.name)
    shown = describe(node)
    if name == "bool":
        return _of(BOOL)
    if name in _NUMBER_FILTERS:
        return _of(NUMBER, f"`{shown}` is a number")
    if name in _STRING_FILTERS:
        return _of(STRING, f"`{shown}` is a string")
    if name in _LIST_FILTERS:
        return _of(LIST, f"`{shown}` is a list")
    if name in _DICT_FILTERS:
        return _of(DICT, f"`{shown}` is a mapping")
    if name in _PASSTHROUGH_FILTERS:
        return again(node.node)
    if name in {"default", "d"}:
        if not node.args:
            return _union(again(node.node), _of(STRING, "its default '' is a string"))
        fallback = again(node.args[0])
        if fallback.may_be_other_than():
            fallback = Inferred(fallback.types, _default_why(node.args[0], fallback))
        return _union(again(node.node), fallback)
    if name == "ternary":
        chosen = [again(arg) for arg in node.args[:3]]
        return _union(*chosen) if chosen else _UNKNOWN
    return _UNKNOWN


def _a(kind: str) -> str:
    return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"


def _default_why(argument: nodes.Node, inferred: Inferred) -> str:
    kinds = sorted(inferred.types - {UNKNOWN})
    return f"its default {describe(argument)} is {_a(kinds[0]) if kinds else 'unknown'}"


def _call(node: nodes.Call) -> Inferred:
    target = node.node
    if isinstance(target, nodes.Getattr):
        if target.attr in _BOOL_METHODS:
            return _of(BOOL)
        if target.attr in _STRING_METHODS:
            return _of(STRING, f"`.{target.attr}()` gives a string")
        if target.attr in _LIST_METHODS:
            return _of(LIST, f"`.{target.attr}()` gives a list")
        return _UNKNOWN
    if isinstance(target, nodes.Name):
        if target.name in {"query", "q", "range"}:
            return _of(LIST, f"`{target.name}(...)` gives a list")
        if target.name == "lookup" and node.args and isinstance(node.args[0], nodes.Const):
            plugin = _short(str(node.args[0].value))
            wants_list = any(k.key == "wantlist" for k in node.kwargs)
            if plugin in _STRING_LOOKUPS and not wants_list:
                return _of(STRING, f"`lookup({plugin!r}, ...)` gives a string")
    return _UNKNOWN


def _result_key(node: nodes.Getattr | nodes.Getitem, scope: Scope) -> Inferred:
    """`registered.key` for keys whose type modules fix (`rc`, `stdout`, `resources`)."""
    if isinstance(node, nodes.Getattr):
        key = node.attr
    elif isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str):
        key = node.arg.value
    else:
        return _UNKNOWN
    owner = node.node
    if isinstance(owner, nodes.Name) and owner.name in scope.registered and key in _RESULT_KEYS:
        kind, what = _RESULT_KEYS[key]
        return _of(kind, f"`{describe(node)}` is {what}")
    return _UNKNOWN


def literal_type(value: object, what: str) -> Inferred:
    if isinstance(value, bool):
        return _of(BOOL)
    if isinstance(value, int | float):
        return _of(NUMBER, f"{what} is a number")
    if isinstance(value, list):
        return _of(LIST, f"{what} is a list")
    if isinstance(value, dict):
        return _of(DICT, f"{what} is a mapping")
    if value is None:
        return _of(NONE, f"{what} is None")
    if isinstance(value, str):
        if "{{" in value or "{%" in value:
            try:
                expression = single_expression(parse_template(value))
            except jinja2.TemplateSyntaxError:
                return _UNKNOWN
            if expression is None:
                return _of(STRING, f"{what} is a string")
            inferred = infer(expression)
            kinds = sorted(inferred.types - {UNKNOWN})
            why = f"{what} is {value!r}, {_a(kinds[0])}" if kinds else ""
            return Inferred(inferred.types, why)
        return _of(STRING, f"{what} is a string")
    return _UNKNOWN
