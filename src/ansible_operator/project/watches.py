"""Load and strictly validate an Operator SDK ``watches.yaml``.

Compatible with the reference (Operator SDK's Ansible operator): the same keys, matched
case-insensitively, ``$VAR`` expansion, the same role resolution and the same per-watch
environment overrides. Unlike the reference, every mistake (an unknown key, a wrong type, a
role that cannot be found) is an error that names the file, the line and the key; all of them
are reported at once.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ansible_operator.conversion.kinds import KindConversion
from ansible_operator.kube.selectors import label_predicate
from ansible_operator.kube.types import GVK
from ansible_operator.project import conversion_entries
from ansible_operator.project.role_search import role_candidates, role_not_found
from ansible_operator.project.watch_fields import (
    EnvOverride,
    NodeReader,
    between,
    count,
    describe,
    option,
    options_of,
)
from ansible_operator.project.webhook_entries import Webhook, is_webhook_entry, read_entry
from ansible_operator.settings.runs import MIN_RECONCILE_PERIOD

__all__ = [
    "GVK",
    "Finalizer",
    "KindConversion",
    "LabelSelector",
    "Watch",
    "WatchesError",
    "WatchesFile",
    "Webhook",
    "load_watches",
    "load_watches_file",
]


class WatchesError(Exception):
    """The watches file is invalid. ``problems`` holds one ``FILE:LINE: message`` per problem."""

    def __init__(self, problems: Iterable[str]) -> None:
        self.problems: list[str] = list(problems)
        super().__init__("\n".join(self.problems))

    def __str__(self) -> str:
        return "\n".join(self.problems)


@dataclass(frozen=True)
class LabelSelector:
    match_labels: dict[str, str] = field(default_factory=dict)
    match_expressions: tuple[tuple[str, str, tuple[str, ...]], ...] = ()

    def to_query(self) -> str:
        """The selector as a Kubernetes ``labelSelector`` query string."""
        parts = [f"{key}={value}" for key, value in self.match_labels.items()]
        for key, operator, values in self.match_expressions:
            if operator == "In":
                parts.append(f"{key} in ({','.join(values)})")
            elif operator == "NotIn":
                parts.append(f"{key} notin ({','.join(values)})")
            elif operator == "Exists":
                parts.append(key)
            elif operator == "DoesNotExist":
                parts.append(f"!{key}")
        return ",".join(parts)

    def matches(self, labels: Mapping[str, str]) -> bool:
        """What the API server answers for `to_query()`: one evaluator for both."""
        return label_predicate(self.to_query())(labels)


@dataclass(frozen=True)
class Finalizer:
    name: str
    role: Path | None = None
    playbook: Path | None = None
    vars: dict[str, Any] = field(default_factory=dict)


WATCH_PRIORITY_BOUND = 1000  # a watch's priority: -1000..1000


def _reconcile_period(reader: NodeReader, node: yaml.Node, name: str) -> float | None:
    # Raised to the floor with a warning rather than refused: a file the reference
    # accepts keeps loading (see MIN_RECONCILE_PERIOD for why the floor exists).
    period = reader.duration(node, name)
    if period is not None and period < MIN_RECONCILE_PERIOD:
        log.warning(
            "%s: %r %gs is below the floor of %gs; %gs is used",
            reader.where(node),
            name,
            period,
            MIN_RECONCILE_PERIOD,
            MIN_RECONCILE_PERIOD,
        )
        return MIN_RECONCILE_PERIOD
    return period


@dataclass(frozen=True)
class Watch:
    """One watch. Each option is declared here, once: its key, default, reader and any
    environment override; `WATCH_KEYS` and the loader follow from these declarations."""

    gvk: GVK  # keys version, group, kind
    role: Path | None  # `role` or `playbook`, resolved by `_Loader.target`
    playbook: Path | None
    vars: dict[str, Any]
    max_runner_artifacts: int = field(
        default=20, metadata=option("maxRunnerArtifacts", count(minimum=0))
    )
    reconcile_period: float | None = field(
        default=None, metadata=option("reconcilePeriod", _reconcile_period)
    )
    manage_status: bool = field(default=True, metadata=option("manageStatus", NodeReader.boolean))
    watch_dependent_resources: bool = field(
        default=True, metadata=option("watchDependentResources", NodeReader.boolean)
    )
    watch_cluster_scoped_resources: bool = field(
        default=False, metadata=option("watchClusterScopedResources", NodeReader.boolean)
    )
    snake_case_parameters: bool = field(
        default=True, metadata=option("snakeCaseParameters", NodeReader.boolean)
    )
    watch_annotations_changes: bool = field(
        default=False, metadata=option("watchAnnotationsChanges", NodeReader.boolean)
    )
    # Cluster data is never templated unless asked (the reference defaults to false).
    mark_unsafe: bool = field(default=True, metadata=option("markUnsafe", NodeReader.boolean))
    # Variables the role assigns itself that a spec key may still override (an object
    # that sets one is refused otherwise: reserved_vars.py).
    spec_may_override: tuple[str, ...] = field(
        default=(), metadata=option("specMayOverride", NodeReader.names)
    )
    blacklist: tuple[GVK, ...] = field(
        default=(), metadata=option("blacklist", lambda r, node, _: r.blacklist(node))
    )
    selector: LabelSelector | None = field(
        default=None, metadata=option("selector", lambda r, node, _: r.selector(node))
    )
    finalizer: Finalizer | None = field(
        default=None, metadata=option("finalizer", lambda r, node, _: r.finalizer(node))
    )
    # Our extensions.
    watch_dependent_status: bool = field(
        default=False, metadata=option("watchDependentStatus", NodeReader.boolean)
    )
    run_timeout: float | None = field(
        default=None, metadata=option("runTimeout", NodeReader.duration)
    )
    max_concurrent_reconciles: int | None = field(
        default=None,
        metadata=option(
            "maxConcurrentReconciles",
            count(minimum=1),
            env=EnvOverride(("MAX_CONCURRENT_RECONCILES_{}", "WORKER_{}"), minimum=1),
        ),
    )
    # Added to the priority of every reconcile of this watch's objects
    # (controller/priorities.py): ranks this kind's runs against other kinds'
    # where they wait for the same run slots.
    priority: int = field(
        default=0,
        metadata=option("priority", between(-WATCH_PRIORITY_BOUND, WATCH_PRIORITY_BOUND)),
    )
    # Not a key of the file: set only from the environment.
    ansible_verbosity: int | None = field(
        default=None,
        metadata=option(None, env=EnvOverride(("ANSIBLE_VERBOSITY_{}",), minimum=0, maximum=7)),
    )
    source: str = ""

    def target(self, *, deleting: bool) -> tuple[Path | None, Path | None]:
        """(role, playbook) a run plays: a finalizer's own when it has one."""
        finalizer = self.finalizer if deleting else None
        if finalizer is not None and (finalizer.role or finalizer.playbook):
            return finalizer.role, finalizer.playbook
        return self.role, self.playbook


GVK_KEYS = ("group", "version", "kind")
TARGET_KEYS = ("playbook", "role")
WATCH_OPTIONS = options_of(Watch)
WATCH_KEYS = (
    "version",
    "group",
    "kind",
    *TARGET_KEYS,
    "vars",
    *(spec.key for _, spec in WATCH_OPTIONS if spec.key is not None),
)
SELECTOR_KEYS = ("matchLabels", "matchExpressions")
EXPRESSION_KEYS = ("key", "operator", "values")
FINALIZER_KEYS = ("name", "role", "playbook", "vars")
OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")

_VAR = re.compile(r"\$(?:\{([^}]*)\}|(\w+))")
# What aliases may add to the file, in values and characters: a few
# shared blocks fit; a "billion laughs" (aliases of aliases, a few lines that
# expand to gigabytes) is refused at the alias that goes past it.
ALIAS_EXPANSION_LIMIT = 1_000_000
FALSE_WORDS = frozenset({"false", "no", "off", "0", "n", "f"})  # Ansible's booleans

log = logging.getLogger("ansible_operator.watches")


class _AliasError(yaml.composer.ComposerError):
    """An alias the loader refuses: recursive, or expanding past the limit."""


class _BoundedAliasLoader(yaml.SafeLoader):
    """SafeLoader's composer, counting the size (values and characters) of
    what is composed with every alias counted in full, so an alias bomb fails
    at once, before anything walks its expansion."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._sizes: dict[int, int] = {}  # id(node) -> its size, once composed
        self._composed = 0  # size composed so far, aliases expanded
        self._aliased = 0  # of which aliases

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            node = self.anchors.get(event.anchor)
            if node is not None:
                size = self._sizes.get(id(node))
                if size is None:  # the anchored value is still being composed
                    raise _AliasError(
                        None,
                        None,
                        f"alias *{event.anchor} is inside the value it names (a recursive alias)",
                        event.start_mark,
                    )
                self._composed += size
                self._aliased += size
                if self._aliased > ALIAS_EXPANSION_LIMIT:
                    raise _AliasError(
                        None,
                        None,
                        f"YAML aliases expand the file by more than {ALIAS_EXPANSION_LIMIT} "
                        f"values and characters (at alias *{event.anchor}; aliases of aliases, "
                        "a 'billion laughs'?); write the values out or use fewer aliases",
                        event.start_mark,
                    )
            return super().compose_node(parent, index)
        start = self._composed
        node = super().compose_node(parent, index)
        self._composed += 1 + (len(node.value) if isinstance(node, yaml.ScalarNode) else 0)
        self._sizes[id(node)] = self._composed - start
        return node


def templated_cluster_data(watches: Iterable[Watch]) -> list[str]:
    """One warning per watch whose cluster data Ansible will template
    (`markUnsafe: false`): whoever may create its objects can run code as the
    operator, e.g. with `{{ lookup('pipe', ...) }}` in a spec."""
    return [
        f"{watch.source}: markUnsafe: false: the spec, metadata and status of every "
        f"{watch.gvk.kind} are templated by Ansible, so whoever may create one can run "
        "commands as the operator and read what it can read; remove the key to treat them "
        "as data"
        for watch in watches
        if not watch.mark_unsafe
    ]


@dataclass(frozen=True)
class WatchesFile:
    """Everything a watches file declares: its watches, its admission webhooks and its
    kinds' conversions between versions."""

    watches: list[Watch]
    webhooks: list[Webhook]
    conversions: list[KindConversion] = field(default_factory=list)


def load_watches_file(
    path: Path, *, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> WatchesFile:
    """Load ``path``; raise ``FileNotFoundError`` if it is missing, else ``WatchesError``."""
    path = Path(path)
    env = os.environ if env is None else env
    cwd = Path.cwd() if cwd is None else Path(cwd)
    text = path.read_text(encoding="utf-8")
    loader = _Loader(path, env, cwd)
    watches = loader.load(text)
    return WatchesFile(watches, loader.webhooks, loader.conversions)


def load_watches(
    path: Path, *, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> list[Watch]:
    """The watches of ``path`` (its webhooks are validated too: `load_watches_file`)."""
    return load_watches_file(path, env=env, cwd=cwd).watches


def _expand(value: str, env: Mapping[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group(1) if match.group(1) is not None else match.group(2)
        return env.get(name, match.group(0))

    return _VAR.sub(replace, value)


class _Loader(NodeReader):
    def __init__(self, path: Path, env: Mapping[str, str], cwd: Path) -> None:
        super().__init__(str(path))
        self.path = path
        self.env = env
        self.cwd = cwd
        self.webhooks: list[Webhook] = []
        self.conversions: list[KindConversion] = []

    def expand_nodes(self, node: yaml.Node, seen: set[int] | None = None) -> None:
        # Each node once: an aliased one is shared, and expanded only once.
        seen = set() if seen is None else seen
        if id(node) in seen:
            return
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            if "$" in node.value:
                expanded = _expand(node.value, self.env)
                if expanded != node.value:
                    if node.style is None:  # plain: re-resolve, so "$FLAG" may become a bool
                        node.tag = self._yaml.resolve(yaml.ScalarNode, expanded, (True, False))
                    node.value = expanded
        elif isinstance(node, yaml.SequenceNode):
            for child in node.value:
                self.expand_nodes(child, seen)
        elif isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                self.expand_nodes(key, seen)
                self.expand_nodes(value, seen)

    # -- paths ----------------------------------------------------------------------------

    def resolve_role(self, node: yaml.Node, role: str, name: str) -> Path | None:
        collections_paths = self.collections_paths()
        candidates = role_candidates(
            role,
            roles_paths=self.path_list("ANSIBLE_ROLES_PATH"),
            collections_paths=collections_paths,
            cwd=self.cwd,
        )
        for candidate in candidates:
            if candidate.path.is_dir():
                return candidate.path.resolve()
        problem = role_not_found(
            role,
            candidates,
            collections_paths=collections_paths,
            project_dirs=[self.cwd, self.path.parent],
            cwd=self.cwd,
        )
        self.error(node, f"{name!r}: {problem}")
        return None

    def resolve_playbook(self, node: yaml.Node, playbook: str, name: str) -> Path | None:
        given = Path(playbook)
        if given.is_absolute():
            candidates = [given]
        else:
            candidates = list(dict.fromkeys([self.cwd / given, self.path.parent / given]))
        for candidate in candidates:
            if candidate.is_file():
                return candidate.resolve()
        places = ", ".join(str(p) for p in candidates)
        self.error(node, f"{name!r}: playbook {playbook!r} not found; looked for: {places}")
        return None

    def target(
        self, fields: dict[str, tuple[yaml.Node, yaml.Node]], prefix: str
    ) -> tuple[Path | None, Path | None]:
        """(role, playbook) as named in ``fields`` and resolved; a playbook wins over a role,
        which is then not read. ``prefix`` names the owner in errors (``finalizer.``)."""
        if "playbook" in fields:
            node = fields["playbook"][1]
            text = self.string(node, "playbook")
            if text is not None:
                return None, self.resolve_playbook(node, text, f"{prefix}playbook")
        elif "role" in fields:
            node = fields["role"][1]
            text = self.string(node, "role")
            if text is not None:
                return self.resolve_role(node, text, f"{prefix}role"), None
        return None, None

    def path_list(self, variable: str) -> list[Path]:
        raw = self.env.get(variable, "")
        return [Path(p).expanduser() for p in raw.split(os.pathsep) if p]

    def collections_paths(self) -> list[Path]:
        return self.configured_collections_paths() + self.python_collections_paths()

    def configured_collections_paths(self) -> list[Path]:
        for variable in ("ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_COLLECTIONS_PATHS"):
            if self.env.get(variable):
                return self.path_list(variable)
        # Ansible's defaults, as the reference uses when the variable is unset.
        defaults = [Path("/usr/share/ansible/collections")]
        home = self.env.get("HOME")
        if home:
            defaults.insert(0, Path(home) / ".ansible" / "collections")
        return defaults

    def python_collections_paths(self) -> list[Path]:
        """The Python paths holding collections, which Ansible searches after
        the configured ones (our image installs kubernetes.core there); the
        reference does not look there, so a role of theirs is found only by us."""
        if self.env.get("ANSIBLE_COLLECTIONS_SCAN_SYS_PATH", "").lower() in FALSE_WORDS:
            return []
        return [Path(p) for p in sys.path if p and Path(p, "ansible_collections").is_dir()]

    # -- the file ---------------------------------------------------------------------

    def load(self, text: str) -> list[Watch]:
        try:
            root = yaml.compose(text, Loader=_BoundedAliasLoader)
        except _AliasError as exc:
            assert exc.problem_mark is not None
            raise WatchesError(
                [f"{self.label}:{exc.problem_mark.line + 1}: {exc.problem}"]
            ) from None
        except yaml.YAMLError as exc:
            problem = getattr(exc, "problem_mark", None)
            context = getattr(exc, "context_mark", None)
            mark = problem or context
            line = mark.line + 1 if mark is not None else 1
            end = len(text.rstrip())
            if problem is not None and problem.index >= end:
                # Ran off the end: point at the line that opened what was never
                # closed, or else at the last line there is.
                if context is not None and context.index < end:
                    line = context.line + 1
                else:
                    line = text.rstrip().count("\n") + 1
            detail = " ".join(str(exc).split())
            raise WatchesError([f"{self.label}:{line}: invalid YAML: {detail}"]) from None
        if root is None:
            raise WatchesError([f"{self.label}:1: the file is empty; expected a list of watches"])
        if not isinstance(root, yaml.SequenceNode):
            raise WatchesError(
                [
                    f"{self.where(root)}: expected a list of watches (entries starting "
                    f"with '- version: ...'), not {describe(self.construct(root))}"
                ]
            )
        self.expand_nodes(root)
        watches: list[Watch] = []
        first_seen: dict[GVK, int] = {}
        for entry in root.value:
            if not isinstance(entry, yaml.MappingNode):
                value = self.construct(entry)
                self.error(entry, f"each watch must be a mapping, not {describe(value)}")
                continue
            if is_webhook_entry(entry):
                self.webhook(entry)
                continue
            if conversion_entries.is_conversion_entry(entry):
                self.conversion(entry)
                continue
            watch = self.watch(entry)
            if watch is None:
                continue
            line = entry.start_mark.line + 1
            if watch.gvk in first_seen:
                self.error(
                    entry,
                    f"duplicate watch for {watch.gvk}: already defined at "
                    f"{self.label}:{first_seen[watch.gvk]}",
                )
                continue
            first_seen[watch.gvk] = line
            watches.append(watch)
        if self.errors:
            raise WatchesError(self.errors)
        return watches

    def gvk(
        self, node: yaml.MappingNode, fields: dict[str, tuple[yaml.Node, yaml.Node]], what: str
    ) -> GVK | None:
        ok = True
        values: dict[str, str] = {}
        for key in GVK_KEYS:
            if key not in fields:
                if key == "group":
                    values[key] = ""
                    continue
                self.error(node, f"{what}: {key!r} is required")
                ok = False
                continue
            value = self.string(fields[key][1], key, empty_ok=key == "group")
            if value is None:
                ok = False
            else:
                values[key] = value
        return GVK(**values) if ok else None

    def watch(self, node: yaml.MappingNode) -> Watch | None:
        errors_before = len(self.errors)
        fields = self.fields(node, WATCH_KEYS, "watch")
        gvk = self.gvk(node, fields, "watch")
        role, playbook = self.target(fields, "")
        if not fields.keys() & set(TARGET_KEYS):
            self.error(node, "watch: needs a 'role' or a 'playbook'")
        watch_vars: dict[str, Any] = {}
        if "vars" in fields:
            watch_vars = self.mapping(fields["vars"][1], "vars") or {}
        options: dict[str, Any] = {}
        for attribute, spec in WATCH_OPTIONS:
            if spec.key in fields and spec.read is not None:
                value = spec.read(self, fields[spec.key][1], spec.key)
                if value is not None:
                    options[attribute] = value
        if gvk is not None:
            self.env_overrides(node, gvk, options)
        if gvk is None or len(self.errors) > errors_before:
            return None
        return Watch(
            gvk=gvk,
            role=role,
            playbook=playbook,
            vars=watch_vars,
            source=self.where(node),
            **options,
        )

    def webhook(self, entry: yaml.MappingNode) -> None:
        webhook = read_entry(self, entry)
        if webhook is None:
            return
        for other in self.webhooks:
            if other.name == webhook.name:
                self.error(
                    entry,
                    f"duplicate webhook {webhook.name!r}: already defined at {other.source}",
                )
                return
        self.webhooks.append(webhook)

    def conversion(self, entry: yaml.MappingNode) -> None:
        conversion = conversion_entries.read_entry(self, entry)
        if conversion is None:
            return
        for other in self.conversions:
            if (other.group, other.kind) == (conversion.group, conversion.kind):
                self.error(
                    entry,
                    f"duplicate conversion of {conversion.kind}.{conversion.group}: already "
                    f"declared at {other.source}",
                )
                return
        self.conversions.append(conversion)

    def label_selector(self, node: yaml.Node, name: str) -> dict[str, Any] | None:
        """A selector as Kubernetes objects carry it (webhooks' namespaceSelector...)."""
        selector = self.selector(node, name)
        if selector is None:
            return None
        found: dict[str, Any] = {}
        if selector.match_labels:
            found["matchLabels"] = dict(selector.match_labels)
        if selector.match_expressions:
            found["matchExpressions"] = [
                {"key": key, "operator": operator, **({"values": list(values)} if values else {})}
                for key, operator, values in selector.match_expressions
            ]
        return found

    def env_overrides(self, node: yaml.Node, gvk: GVK, options: dict[str, Any]) -> None:
        """Per-watch environment variables win over the file, as in the reference."""
        for attribute, spec in WATCH_OPTIONS:
            if spec.env is None:
                continue
            for template in spec.env.templates:
                variable = template.format(gvk.env_suffix)
                raw = self.env.get(variable)
                if raw is None:
                    continue
                value = spec.env.parse(raw)
                if value is None:
                    self.error(
                        node,
                        f"environment variable {variable} must be {spec.env.requirement}, "
                        f"not {raw!r}",
                    )
                else:
                    options[attribute] = value
                break

    def blacklist(self, node: yaml.Node) -> tuple[GVK, ...]:
        if not isinstance(node, yaml.SequenceNode):
            value = self.construct(node)
            if value is None:
                return ()
            self.error(
                node,
                f"'blacklist' must be a list of {{group, version, kind}}, not {describe(value)}",
            )
            return ()
        result: list[GVK] = []
        for item in node.value:
            if not isinstance(item, yaml.MappingNode):
                self.error(
                    item,
                    "'blacklist': each entry must be a mapping with group, version and kind, "
                    f"not {describe(self.construct(item))}",
                )
                continue
            fields = self.fields(item, GVK_KEYS, "blacklist entry")
            gvk = self.gvk(item, fields, "blacklist entry")
            if gvk is not None:
                result.append(gvk)
        return tuple(result)

    def selector(self, node: yaml.Node, name: str = "selector") -> LabelSelector | None:
        if not isinstance(node, yaml.MappingNode):
            value = self.construct(node)
            if value is not None:
                self.error(node, f"{name!r} must be a mapping, not {describe(value)}")
            return None
        fields = self.fields(node, SELECTOR_KEYS, name)
        labels: dict[str, str] = {}
        if "matchLabels" in fields:
            value_node = fields["matchLabels"][1]
            raw = self.mapping(value_node, "matchLabels") or {}
            for key, value in raw.items():
                if not isinstance(value, str):
                    self.error(
                        value_node,
                        f"'matchLabels': value of {key!r} must be a string, not "
                        f"{describe(value)} (quote it)",
                    )
                else:
                    labels[key] = value
        expressions: list[tuple[str, str, tuple[str, ...]]] = []
        if "matchExpressions" in fields:
            value_node = fields["matchExpressions"][1]
            if not isinstance(value_node, yaml.SequenceNode):
                value = self.construct(value_node)
                if value is not None:
                    self.error(
                        value_node, f"'matchExpressions' must be a list, not {describe(value)}"
                    )
            else:
                for item in value_node.value:
                    expression = self.expression(item)
                    if expression is not None:
                        expressions.append(expression)
        if not labels and not expressions:
            return None
        return LabelSelector(match_labels=labels, match_expressions=tuple(expressions))

    def expression(self, node: yaml.Node) -> tuple[str, str, tuple[str, ...]] | None:
        if not isinstance(node, yaml.MappingNode):
            self.error(
                node,
                "'matchExpressions': each entry must be a mapping with key, operator and "
                f"values, not {describe(self.construct(node))}",
            )
            return None
        fields = self.fields(node, EXPRESSION_KEYS, "matchExpressions entry")
        ok = True
        key = operator = None
        for name in ("key", "operator"):
            if name not in fields:
                self.error(node, f"'matchExpressions' entry: {name!r} is required")
                ok = False
        if "key" in fields:
            key = self.string(fields["key"][1], "key")
        if "operator" in fields:
            operator = self.string(fields["operator"][1], "operator")
            if operator is not None and operator not in OPERATORS:
                self.error(
                    fields["operator"][1],
                    f"'operator' must be one of {', '.join(OPERATORS)}, not {operator!r}",
                )
                operator = None
        values: list[str] = []
        if "values" in fields:
            value_node = fields["values"][1]
            raw = self.construct(value_node)
            if raw is None:
                raw = []
            if not isinstance(raw, list) or not all(isinstance(v, str) for v in raw):
                self.error(value_node, f"'values' must be a list of strings, not {raw!r}")
                ok = False
            else:
                values = raw
        if key is None or operator is None or not ok:
            return None
        if operator in ("In", "NotIn") and not values:
            self.error(node, f"'matchExpressions' entry: operator {operator} needs 'values'")
            return None
        if operator in ("Exists", "DoesNotExist") and values:
            self.error(
                node, f"'matchExpressions' entry: operator {operator} must not have 'values'"
            )
            return None
        return key, operator, tuple(values)

    def finalizer(self, node: yaml.Node) -> Finalizer | None:
        if not isinstance(node, yaml.MappingNode):
            value = self.construct(node)
            self.error(
                node,
                "'finalizer' must be a mapping with 'name' and a 'role', 'playbook' or "
                f"'vars', not {describe(value)}",
            )
            return None
        fields = self.fields(node, FINALIZER_KEYS, "finalizer")
        name = None
        if "name" not in fields:
            self.error(node, "finalizer: 'name' is required")
        else:
            name = self.string(fields["name"][1], "name")
        role, playbook = self.target(fields, "finalizer.")
        finalizer_vars: dict[str, Any] = {}
        if "vars" in fields:
            finalizer_vars = self.mapping(fields["vars"][1], "vars") or {}
        if not ({"role", "playbook", "vars"} & fields.keys()):
            self.error(node, "finalizer: needs a 'role', a 'playbook' or 'vars'")
            return None
        if name is None:
            return None
        return Finalizer(name=name, role=role, playbook=playbook, vars=finalizer_vars)
