"""The webhook entries of ``watches.yaml``: admission webhooks whose logic is an Ansible role.

An entry of the file is either a watch or ``- webhook: {...}``::

    - webhook:
        name: image-rewrite.goharbor.io       # the webhook's name: a domain of 3+ parts
        type: mutating                        # or validating
        rules:                                # what the API server sends us, as in Kubernetes
          - apiGroups: [""]
            apiVersions: [v1]
            resources: [pods]
            operations: [CREATE]
            scope: Namespaced                 # optional: Cluster, Namespaced or * (default)
        role: image_rewrite                   # or playbook:, resolved as a watch's are
        namespaceSelector: {matchLabels: {rewrite: "on"}}   # optional, as `selector`
        objectSelector: {...}                 # optional
        failurePolicy: Fail                   # Fail (default) or Ignore
        timeoutSeconds: 10                    # 1..30, default 10
        sideEffects: None                     # None (default) or NoneOnDryRun
        reinvocationPolicy: Never             # mutating only: Never (default) or IfNeeded
        vars: {...}                           # the author's, templated, as a watch's vars
        maxRunnerArtifacts: 20

The options with defaults are declared once on `Webhook`, with the same `option()` table the
watch's options use (watch_fields.py); the required keys (name, type, rules, role or playbook)
are read by `read_webhook`. The loader (watches.py) hands it the webhook's mapping node.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from ansible_operator.project.watch_fields import (
    NodeReader,
    between,
    choice,
    count,
    describe,
    option,
    options_of,
)

MUTATING = "mutating"
VALIDATING = "validating"
TYPES = (MUTATING, VALIDATING)
OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT", "*")
SCOPES = ("Cluster", "Namespaced", "*")
RULE_LISTS = ("apiGroups", "apiVersions", "resources", "operations")
RULE_KEYS = (*RULE_LISTS, "scope")
RULE_EXAMPLES = {
    "apiGroups": '[""] for the core group, [apps]',
    "apiVersions": "[v1]",
    "resources": "[pods], [deployments/scale]",
    "operations": "[CREATE, UPDATE]",
}
# As the API server validates a webhook's name: a fully qualified, lower-case
# domain of at least three parts.
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?){2,}$")
MAX_NAME = 253


@dataclass(frozen=True)
class WebhookRule:
    """One rule, as Kubernetes' RuleWithOperations."""

    api_groups: tuple[str, ...]
    api_versions: tuple[str, ...]
    resources: tuple[str, ...]
    operations: tuple[str, ...]
    scope: str = "*"

    def manifest(self) -> dict[str, Any]:
        return {
            "apiGroups": list(self.api_groups),
            "apiVersions": list(self.api_versions),
            "resources": list(self.resources),
            "operations": list(self.operations),
            "scope": self.scope,
        }


def _reinvocation(reader: NodeReader, node: yaml.Node, name: str) -> str | None:
    return choice("Never", "IfNeeded")(reader, node, name)


@dataclass(frozen=True)
class Webhook:
    """One admission webhook served by the operator."""

    name: str
    type: str  # MUTATING or VALIDATING
    rules: tuple[WebhookRule, ...]
    role: Path | None
    playbook: Path | None
    vars: dict[str, Any] = field(default_factory=dict)
    # Kubernetes LabelSelectors as the configuration carries them (None: everything).
    namespace_selector: dict[str, Any] | None = field(
        default=None,
        metadata=option("namespaceSelector", lambda r, node, name: r.label_selector(node, name)),
    )
    object_selector: dict[str, Any] | None = field(
        default=None,
        metadata=option("objectSelector", lambda r, node, name: r.label_selector(node, name)),
    )
    failure_policy: str = field(
        default="Fail", metadata=option("failurePolicy", choice("Fail", "Ignore"))
    )
    timeout_seconds: int = field(default=10, metadata=option("timeoutSeconds", between(1, 30)))
    side_effects: str = field(
        default="None", metadata=option("sideEffects", choice("None", "NoneOnDryRun"))
    )
    reinvocation_policy: str = field(
        default="Never", metadata=option("reinvocationPolicy", _reinvocation)
    )
    max_runner_artifacts: int = field(
        default=20, metadata=option("maxRunnerArtifacts", count(minimum=0))
    )
    source: str = ""  # FILE:LINE of the entry

    @property
    def mutating(self) -> bool:
        return self.type == MUTATING

    @property
    def path(self) -> str:
        """Where the operator serves it: /mutate/<name> or /validate/<name>."""
        return f"/{'mutate' if self.mutating else 'validate'}/{self.name}"

    def may_write(self, dry_run: bool) -> bool:
        """Whether a run for one request may write through the proxy: never with
        `sideEffects: None`, and with `NoneOnDryRun` only for a real request."""
        return self.side_effects == "NoneOnDryRun" and not dry_run


WEBHOOK_OPTIONS = options_of(Webhook)
TARGET_KEYS = ("playbook", "role")
WEBHOOK_KEYS = (
    "name",
    "type",
    "rules",
    *TARGET_KEYS,
    "vars",
    *(spec.key for _, spec in WEBHOOK_OPTIONS if spec.key is not None),
)
ENTRY_KEY = "webhook"


class EntryReader(Protocol):
    """What `read_webhook` needs of the watches loader: NodeReader's typed reading, and
    the loader's role/playbook resolution and label selectors."""

    errors: list[str]

    def error(self, node: yaml.Node | int, message: str) -> None: ...

    def where(self, node: yaml.Node) -> str: ...

    def construct(self, node: yaml.Node) -> Any: ...

    def fields(
        self, node: yaml.MappingNode, known: tuple[str, ...], what: str
    ) -> dict[str, tuple[yaml.Node, yaml.Node]]: ...

    def string(self, node: yaml.Node, name: str, *, empty_ok: bool = False) -> str | None: ...

    def mapping(self, node: yaml.Node, name: str) -> dict[str, Any] | None: ...

    def target(
        self, fields: dict[str, tuple[yaml.Node, yaml.Node]], prefix: str
    ) -> tuple[Path | None, Path | None]: ...

    def label_selector(self, node: yaml.Node, name: str) -> dict[str, Any] | None: ...


def is_webhook_entry(node: yaml.MappingNode) -> bool:
    """Whether a list entry of the file is a webhook (has the key `webhook`, any case)."""
    return any(
        isinstance(key, yaml.ScalarNode) and str(key.value).lower() == ENTRY_KEY
        for key, _ in node.value
    )


def read_entry(reader: EntryReader, entry: yaml.MappingNode) -> Webhook | None:
    """`- webhook: {...}`: the entry holds nothing else."""
    fields = reader.fields(entry, (ENTRY_KEY,), "webhook entry")
    if ENTRY_KEY not in fields:
        return None  # its key was refused (e.g. given twice): already reported
    node = fields[ENTRY_KEY][1]
    if not isinstance(node, yaml.MappingNode):
        reader.error(
            node,
            "'webhook' must be a mapping with name, type, rules and a role or playbook, "
            f"not {describe(reader.construct(node))}",
        )
        return None
    return read_webhook(reader, node, source=reader.where(entry))


def read_webhook(reader: EntryReader, node: yaml.MappingNode, *, source: str) -> Webhook | None:
    errors_before = len(reader.errors)
    fields = reader.fields(node, WEBHOOK_KEYS, "webhook")
    name = _name(reader, node, fields)
    kind = _type(reader, node, fields)
    rules = _rules(reader, node, fields)
    role, playbook = reader.target(fields, "webhook.")
    if not fields.keys() & set(TARGET_KEYS):
        reader.error(node, "webhook: needs a 'role' or a 'playbook'")
    webhook_vars: dict[str, Any] = {}
    if "vars" in fields:
        webhook_vars = reader.mapping(fields["vars"][1], "vars") or {}
    options: dict[str, Any] = {}
    for attribute, spec in WEBHOOK_OPTIONS:
        if spec.key in fields and spec.read is not None:
            value = spec.read(reader, fields[spec.key][1], spec.key)  # type: ignore[arg-type]
            if value is not None:
                options[attribute] = value
    if "reinvocationPolicy" in fields and kind == VALIDATING:
        reader.error(
            fields["reinvocationPolicy"][0],
            "webhook: 'reinvocationPolicy' is for mutating webhooks only",
        )
    if name is None or kind is None or rules is None or len(reader.errors) > errors_before:
        return None
    return Webhook(
        name=name,
        type=kind,
        rules=rules,
        role=role,
        playbook=playbook,
        vars=webhook_vars,
        source=source,
        **options,
    )


def _name(
    reader: EntryReader, node: yaml.Node, fields: dict[str, tuple[yaml.Node, yaml.Node]]
) -> str | None:
    if "name" not in fields:
        reader.error(node, "webhook: 'name' is required (e.g. name: check.example.com)")
        return None
    value_node = fields["name"][1]
    name = reader.string(value_node, "name")
    if name is None:
        return None
    if len(name) > MAX_NAME or not _NAME.match(name):
        reader.error(
            value_node,
            f"webhook: 'name' must be a lower-case domain of at least three parts, as "
            f"Kubernetes requires (e.g. image-rewrite.example.com), not {name!r}",
        )
        return None
    return name


def _type(
    reader: EntryReader, node: yaml.Node, fields: dict[str, tuple[yaml.Node, yaml.Node]]
) -> str | None:
    if "type" not in fields:
        reader.error(node, f"webhook: 'type' is required ({' or '.join(TYPES)})")
        return None
    return choice(*TYPES)(reader, fields["type"][1], "type")  # type: ignore[arg-type]


def _rules(
    reader: EntryReader, node: yaml.Node, fields: dict[str, tuple[yaml.Node, yaml.Node]]
) -> tuple[WebhookRule, ...] | None:
    if "rules" not in fields:
        reader.error(
            node,
            "webhook: 'rules' is required: a list of {apiGroups, apiVersions, resources, "
            "operations}",
        )
        return None
    value_node = fields["rules"][1]
    if not isinstance(value_node, yaml.SequenceNode) or not value_node.value:
        reader.error(
            value_node,
            "webhook: 'rules' must be a non-empty list of {apiGroups, apiVersions, resources, "
            f"operations}}, not {describe(reader.construct(value_node))}",
        )
        return None
    rules = [_rule(reader, item) for item in value_node.value]
    if any(rule is None for rule in rules):
        return None
    return tuple(rule for rule in rules if rule is not None)


def _rule(reader: EntryReader, node: yaml.Node) -> WebhookRule | None:
    if not isinstance(node, yaml.MappingNode):
        reader.error(
            node,
            "'rules': each entry must be a mapping with apiGroups, apiVersions, resources and "
            f"operations, not {describe(reader.construct(node))}",
        )
        return None
    fields = reader.fields(node, RULE_KEYS, "rules entry")
    lists: dict[str, tuple[str, ...]] = {}
    for key in RULE_LISTS:
        if key not in fields:
            reader.error(node, f"'rules' entry: {key!r} is required")
            continue
        value = _strings(reader, fields[key][1], key, empty_ok=key == "apiGroups")
        if value is not None:
            lists[key] = value
    if "operations" in lists:
        unknown = [op for op in lists["operations"] if op not in OPERATIONS]
        if unknown:
            reader.error(
                fields["operations"][1],
                f"'operations' must be among {', '.join(OPERATIONS)}, not {unknown[0]!r}",
            )
            return None
    scope = "*"
    if "scope" in fields:
        scope = choice(*SCOPES)(reader, fields["scope"][1], "scope")  # type: ignore[arg-type]
        if scope is None:
            return None
    if len(lists) < len(RULE_LISTS):
        return None
    return WebhookRule(
        api_groups=lists["apiGroups"],
        api_versions=lists["apiVersions"],
        resources=lists["resources"],
        operations=lists["operations"],
        scope=scope,
    )


def _strings(
    reader: EntryReader, node: yaml.Node, name: str, *, empty_ok: bool
) -> tuple[str, ...] | None:
    """A non-empty list of strings (`""`, the core group, only where `empty_ok`)."""
    value = reader.construct(node)
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(item, str) and (item or empty_ok) for item in value)
    ):
        example = RULE_EXAMPLES[name]
        reader.error(
            node,
            f"{name!r} must be a non-empty list of strings (e.g. {example}), not {value!r}",
        )
        return None
    return tuple(value)
