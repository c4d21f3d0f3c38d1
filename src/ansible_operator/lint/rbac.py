"""What a role's Kubernetes tasks may do to the API, found without running them,
against what config/rbac/role.yaml allows: an RBAC gap is a warning at the task,
not a 403 once deployed.

A task's module and arguments say which verbs it uses (`k8s` with `state: absent`
deletes, `k8s_info` gets or lists, `k8s_status` patches the status subresource, ...)
and on what: a `definition` or `src` file with a literal `kind` and `apiVersion`,
`kind:`/`api_version:` arguments, or the role's template or file a `definition`
reads (`lookup('template', 'x.yaml.j2') | from_yaml`, the `template:` argument),
whose literal `kind:` lines say what it makes (resource_templates.py). A kind
that is templated, or that is neither a built-in kind known here nor a CRD of
config/crd/bases, is listed as unknown, not guessed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ansible_operator.lint import yaml_nodes as y
from ansible_operator.lint.findings import Finding, error, warning
from ansible_operator.lint.resource_templates import (
    FileRef,
    heads_in_text,
    referenced_files,
    search_path,
)
from ansible_operator.values.rbac_rules import granted, is_role

__all__ = [
    "ROLE_FILE",
    "Unknown",
    "Use",
    "gaps",
    "kinds_of_project",
    "missing_rules",
    "read_rules",
    "uses_in_tasks",
]

ROLE_FILE = Path("config/rbac/role.yaml")
FIX = "run `ansible-operator check --fix-rbac` to add them"
# Where Kubernetes modules come from; a short name is found through `collections:`.
_COLLECTIONS = (
    "kubernetes.core.",
    "community.kubernetes.",
    "community.okd.",
    "redhat.openshift.",
    "operator_sdk.util.",
)
_BLOCK_KEYS = ("block", "rescue", "always")
# What the proxy does on a run's behalf with the operator's own credentials: a kind a
# run creates gets a watch (watchDependentResources), which needs list and watch.
_DEPENDENT_WATCH = ("list", "watch")

# (group, kind) -> plural, for the kinds a role is likely to touch.
BUILT_IN: dict[tuple[str, str], str] = {
    **{
        ("", kind): plural
        for kind, plural in (
            ("Pod", "pods"),
            ("Service", "services"),
            ("ConfigMap", "configmaps"),
            ("Secret", "secrets"),
            ("ServiceAccount", "serviceaccounts"),
            ("PersistentVolumeClaim", "persistentvolumeclaims"),
            ("PersistentVolume", "persistentvolumes"),
            ("Namespace", "namespaces"),
            ("Node", "nodes"),
            ("Endpoints", "endpoints"),
            ("Event", "events"),
            ("LimitRange", "limitranges"),
            ("ResourceQuota", "resourcequotas"),
            ("ReplicationController", "replicationcontrollers"),
            ("PodTemplate", "podtemplates"),
        )
    },
    **{
        ("apps", kind): plural
        for kind, plural in (
            ("Deployment", "deployments"),
            ("StatefulSet", "statefulsets"),
            ("DaemonSet", "daemonsets"),
            ("ReplicaSet", "replicasets"),
            ("ControllerRevision", "controllerrevisions"),
        )
    },
    ("batch", "Job"): "jobs",
    ("batch", "CronJob"): "cronjobs",
    ("autoscaling", "HorizontalPodAutoscaler"): "horizontalpodautoscalers",
    ("policy", "PodDisruptionBudget"): "poddisruptionbudgets",
    ("networking.k8s.io", "Ingress"): "ingresses",
    ("networking.k8s.io", "IngressClass"): "ingressclasses",
    ("networking.k8s.io", "NetworkPolicy"): "networkpolicies",
    ("discovery.k8s.io", "EndpointSlice"): "endpointslices",
    ("rbac.authorization.k8s.io", "Role"): "roles",
    ("rbac.authorization.k8s.io", "RoleBinding"): "rolebindings",
    ("rbac.authorization.k8s.io", "ClusterRole"): "clusterroles",
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): "clusterrolebindings",
    ("storage.k8s.io", "StorageClass"): "storageclasses",
    ("scheduling.k8s.io", "PriorityClass"): "priorityclasses",
    ("coordination.k8s.io", "Lease"): "leases",
    ("events.k8s.io", "Event"): "events",
    ("apiextensions.k8s.io", "CustomResourceDefinition"): "customresourcedefinitions",
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"): (
        "validatingwebhookconfigurations"
    ),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"): (
        "mutatingwebhookconfigurations"
    ),
    ("route.openshift.io", "Route"): "routes",
    ("monitoring.coreos.com", "ServiceMonitor"): "servicemonitors",
    ("monitoring.coreos.com", "PodMonitor"): "podmonitors",
    ("monitoring.coreos.com", "PrometheusRule"): "prometheusrules",
    ("cert-manager.io", "Certificate"): "certificates",
    ("cert-manager.io", "Issuer"): "issuers",
    ("cert-manager.io", "ClusterIssuer"): "clusterissuers",
}


@dataclass(frozen=True, order=True)
class Use:
    """A task's access to one resource (`deployments`, `pods/exec`) of one group."""

    path: str
    line: int
    group: str
    resource: str
    verbs: tuple[str, ...]
    does: str  # what the task does, for messages: "k8s (state: present) writes"

    @property
    def shown(self) -> str:
        return f"{self.group}/{self.resource}" if self.group else self.resource


@dataclass(frozen=True, order=True)
class Unknown:
    """A Kubernetes task whose kind cannot be known without running it."""

    path: str
    line: int
    module: str
    why: str


@dataclass(frozen=True)
class _Target:
    group: str
    resource: str


# -- kinds ------------------------------------------------------------------------------


def kinds_of_project(directory: Path) -> dict[tuple[str, str], str]:
    """(group, kind) -> plural: the built-in kinds and the project's CRDs."""
    kinds = dict(BUILT_IN)
    for path in sorted((directory / "config" / "crd" / "bases").glob("*.y*ml")):
        try:
            documents = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
        except (OSError, yaml.YAMLError):
            continue
        for crd in documents:
            spec = crd.get("spec") if isinstance(crd, dict) else None
            names = spec.get("names") if isinstance(spec, dict) else None
            if isinstance(names, dict) and names.get("kind") and names.get("plural"):
                kinds[(str(spec.get("group") or ""), str(names["kind"]))] = str(names["plural"])
    return kinds


# -- tasks ------------------------------------------------------------------------------


def uses_in_tasks(
    path: Path,
    root: yaml.Node | None,
    keywords: frozenset[str],
    kinds: dict[tuple[str, str], str],
    files: Iterable[Path] = (),
    *,
    home: Path | None = None,
    project: Path | None = None,
) -> tuple[list[Use], list[Unknown]]:
    """The accesses of the tasks in `root` (a task list or a playbook). `files`:
    the folders a `src:` is looked up in (the role's files/, the project);
    `home` (the role, or the playbook's folder) and `project`: where the
    templates and files a definition looks up are found."""
    reader = _TaskReader(path, keywords, kinds, list(files), home, project)
    for task in _tasks(root):
        reader.task(task)
    return reader.uses, reader.unknown


def _tasks(node: yaml.Node | None) -> Iterator[yaml.MappingNode]:
    if not isinstance(node, yaml.SequenceNode):
        return
    for item in node.value:
        if not isinstance(item, yaml.MappingNode):
            continue
        if any(y.get(item, key) is not None for key in _BLOCK_KEYS):
            for key in _BLOCK_KEYS:
                yield from _tasks(y.get(item, key))
        elif y.get(item, "hosts") is not None:  # a play
            for key in ("pre_tasks", "tasks", "post_tasks", "handlers"):
                yield from _tasks(y.get(item, key))
        else:
            yield item


@dataclass
class _TaskReader:
    path: Path
    keywords: frozenset[str]
    kinds: dict[tuple[str, str], str]
    files: list[Path]
    home: Path | None = None
    project: Path | None = None

    def __post_init__(self) -> None:
        self.uses: list[Use] = []
        self.unknown: list[Unknown] = []

    def task(self, task: yaml.MappingNode) -> None:
        found = next(
            (
                (key, value)
                for key, _, value in y.items(task)
                if key not in self.keywords and not key.startswith("with_")
            ),
            None,
        )
        if found is None:
            return
        action, arguments = found
        handler = _MODULES.get(_short(action))
        if handler is None:
            return
        args = {key: value for key, _, value in y.items(arguments)}
        extra = y.get(task, "args")
        args.update({key: value for key, _, value in y.items(extra)})
        handler(self, _Call(task, action, args))

    # -- what each module does ----------------------------------------------------------

    def k8s(self, call: _Call) -> None:
        state = call.text("state") or "present"
        verbs = {
            "present": ("get", "create", "patch"),
            "absent": ("get", "delete"),
            "patched": ("get", "patch"),
        }.get(state)
        if verbs is None:
            self.unknown_use(call, f"`state: {state}` is templated")
            return
        if state == "present" and call.flag("force"):
            verbs = (*verbs, "update")
        if state == "present":
            verbs = (*verbs, *_DEPENDENT_WATCH)
        does = {"present": "creates or changes", "absent": "deletes", "patched": "patches"}
        for target in self.targets(call):
            self.use(call, target, verbs, f"{call.action} {does[state]}")

    def k8s_info(self, call: _Call) -> None:
        verbs = ("get",) if call.text("name") else ("list",)
        if _scalar(call.args.get("label_selectors")) is not None:
            verbs = ("list",)
        for target in self.targets(call):
            self.use(call, target, verbs, f"{call.action} reads")

    def k8s_status(self, call: _Call) -> None:
        for target in self.targets(call):
            self.use(call, target, ("get",), f"{call.action} reads")
            status = _Target(target.group, f"{target.resource}/status")
            verbs = ("update",) if call.flag("replace") else ("patch",)
            self.use(call, status, verbs, f"{call.action} writes the status of")

    def k8s_json_patch(self, call: _Call) -> None:
        for target in self.targets(call):
            self.use(call, target, ("get", "patch"), f"{call.action} patches")

    def k8s_scale(self, call: _Call) -> None:
        for target in self.targets(call):
            self.use(call, target, ("get", "patch"), f"{call.action} scales")

    def k8s_event(self, call: _Call) -> None:
        self.use(call, _Target("", "events"), ("create", "patch"), f"{call.action} records")

    def k8s_exec(self, call: _Call) -> None:
        self.use(call, _Target("", "pods"), ("get",), f"{call.action} reads")
        self.use(call, _Target("", "pods/exec"), ("create", "get"), f"{call.action} runs in")

    def k8s_cp(self, call: _Call) -> None:
        self.use(call, _Target("", "pods"), ("get",), f"{call.action} reads")
        self.use(call, _Target("", "pods/exec"), ("create", "get"), f"{call.action} copies with")

    def k8s_log(self, call: _Call) -> None:
        self.use(call, _Target("", "pods"), ("get", "list"), f"{call.action} reads")
        self.use(call, _Target("", "pods/log"), ("get",), f"{call.action} reads")

    def k8s_service(self, call: _Call) -> None:
        state = call.text("state") or "present"
        verbs = ("get", "delete") if state == "absent" else ("get", "create", "patch")
        self.use(call, _Target("", "services"), verbs, f"{call.action} manages")

    def k8s_drain(self, call: _Call) -> None:
        does = f"{call.action} drains with"
        self.use(call, _Target("", "nodes"), ("get", "patch"), does)
        self.use(call, _Target("", "pods"), ("list", "delete"), does)
        self.use(call, _Target("", "pods/eviction"), ("create",), does)

    def k8s_taint(self, call: _Call) -> None:
        self.use(call, _Target("", "nodes"), ("get", "patch"), f"{call.action} taints")

    def k8s_rollback(self, call: _Call) -> None:
        does = f"{call.action} rolls back"
        for target in self.targets(call):
            self.use(call, target, ("get", "patch"), does)
        self.use(call, _Target("apps", "replicasets"), ("list",), does)
        self.use(call, _Target("apps", "controllerrevisions"), ("list",), does)

    # -- what a call is about ------------------------------------------------------------

    def targets(self, call: _Call) -> list[_Target]:
        """The resources the call names; none (and an unknown) when not literal."""
        definitions = self.definitions(call)
        if definitions is None:
            return []
        if not definitions:
            definitions = [{"kind": call.text("kind"), "apiVersion": call.text("api_version")}]
        found = []
        for definition in definitions:
            target = self.target(call, definition)
            if target is not None:
                found.append(target)
        return found

    def definitions(self, call: _Call) -> list[dict[str, Any]] | None:
        """The literal kinds and apiVersions of `definition`/`src`/`template`; []
        when there is none of them; None when they are templated (reported as unknown)."""
        node = call.args.get("definition") or call.args.get("resource_definition")
        if node is not None:
            if y.is_string(node):
                if "{{" in node.value or "{%" in node.value:
                    return self.templated_definition(call, node.value)
                node = _compose_text(node.value)
            return _heads(node.value if isinstance(node, yaml.SequenceNode) else [node])
        template = call.args.get("template")
        if template is not None:
            return self.template_argument(call, template)
        src = call.text("src")
        if src is None:
            return []
        if "{{" in src:
            self.unknown_use(call, "`src` is templated")
            return None
        for folder in self.files:
            if (folder / src).is_file():
                try:
                    documents = list(yaml.compose_all((folder / src).read_text(encoding="utf-8")))
                except (OSError, yaml.YAMLError):
                    break
                return _heads(documents)
        self.unknown_use(call, f"`src: {src}` is not in the role's files/")
        return None

    def templated_definition(self, call: _Call, text: str) -> list[dict[str, Any]] | None:
        """A `definition` with Jinja in it: YAML text whose `kind:` lines are
        literal, or a lookup of the role's template or file."""
        written = heads_in_text(text)
        if written:
            return written
        refs = referenced_files(text)
        if refs is None:
            self.unknown_use(call, "`definition` looks up a file whose name is templated")
            return None
        if not refs:
            self.unknown_use(call, "`definition` is templated")
            return None
        return self.read_files(call, refs)

    def template_argument(self, call: _Call, node: yaml.Node) -> list[dict[str, Any]] | None:
        """The `k8s` module's `template:` (a path, `{path: ...}`, or a list of them)."""
        items = node.value if isinstance(node, yaml.SequenceNode) else [node]
        refs = []
        for item in items:
            path = _scalar(y.get(item, "path")) if isinstance(item, yaml.MappingNode) else None
            name = path if path is not None else _scalar(item)
            if not isinstance(name, str) or "{{" in name:
                self.unknown_use(call, "`template` is templated")
                return None
            refs.append(FileRef("template", name))
        return self.read_files(call, refs)

    def read_files(self, call: _Call, refs: list[FileRef]) -> list[dict[str, Any]] | None:
        heads: list[dict[str, Any]] = []
        for ref in refs:
            found = self.find(ref)
            if found is None:
                where = f"the role's {'templates' if ref.plugin == 'template' else 'files'}/"
                self.unknown_use(call, f"{ref.plugin} `{ref.name}` is not in {where}")
                return None
            try:
                text = found.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                self.unknown_use(call, f"{ref.plugin} `{ref.name}` cannot be read")
                return None
            written = heads_in_text(text)
            if not written:
                self.unknown_use(call, f"{ref.plugin} `{ref.name}` has no literal `kind:` line")
                return None
            heads += written
        return heads

    def find(self, ref: FileRef) -> Path | None:
        name = Path(ref.name)
        if name.is_absolute():
            return name if name.is_file() else None
        places = search_path(ref.plugin, self.home, self.project) if self.home else []
        if self.project is not None and not self.home:
            places = search_path(ref.plugin, self.project, self.project)
        return next((place / name for place in places if (place / name).is_file()), None)

    def target(self, call: _Call, definition: dict[str, Any]) -> _Target | None:
        kind, api_version = definition.get("kind"), definition.get("apiVersion") or "v1"
        if not kind:
            self.unknown_use(call, "no `kind`")
            return None
        if "{{" in kind or "{{" in api_version:
            self.unknown_use(call, f"the kind is templated (`{kind}`, `{api_version}`)")
            return None
        group = api_version.rsplit("/", 1)[0] if "/" in api_version else ""
        plural = self.kinds.get((group, kind))
        if plural is None:
            self.unknown_use(
                call,
                f"{kind} of {api_version} is not a built-in kind known to check, nor a CRD "
                "in config/crd/bases",
            )
            return None
        return _Target(group, plural)

    def use(self, call: _Call, target: _Target, verbs: tuple[str, ...], does: str) -> None:
        line = y.line_of(call.task)
        self.uses.append(Use(str(self.path), line, target.group, target.resource, verbs, does))

    def unknown_use(self, call: _Call, why: str) -> None:
        self.unknown.append(Unknown(str(self.path), y.line_of(call.task), call.action, why))


@dataclass(frozen=True)
class _Call:
    task: yaml.MappingNode
    action: str  # as written: `k8s`, `kubernetes.core.k8s`
    args: dict[str, yaml.Node]

    def text(self, key: str) -> str | None:
        value = _scalar(self.args.get(key))
        return None if value is None else str(value)

    def flag(self, key: str) -> bool:
        return _scalar(self.args.get(key)) is True


_MODULES = {
    "k8s": _TaskReader.k8s,
    "k8s_info": _TaskReader.k8s_info,
    "k8s_status": _TaskReader.k8s_status,
    "k8s_json_patch": _TaskReader.k8s_json_patch,
    "k8s_scale": _TaskReader.k8s_scale,
    "k8s_event": _TaskReader.k8s_event,
    "k8s_exec": _TaskReader.k8s_exec,
    "k8s_cp": _TaskReader.k8s_cp,
    "k8s_log": _TaskReader.k8s_log,
    "k8s_service": _TaskReader.k8s_service,
    "k8s_drain": _TaskReader.k8s_drain,
    "k8s_taint": _TaskReader.k8s_taint,
    "k8s_rollback": _TaskReader.k8s_rollback,
}


def _scalar(node: yaml.Node | None) -> Any:
    return y.scalar(node) if isinstance(node, yaml.ScalarNode) else None


def _short(action: str) -> str:
    for prefix in _COLLECTIONS:
        if action.startswith(prefix):
            return action[len(prefix) :]
    return action


def _compose_text(text: str) -> yaml.Node | None:
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None


def _heads(nodes: Iterable[yaml.Node | None]) -> list[dict[str, Any]]:
    """The `kind` and `apiVersion` of each object (as text, `{{ }}` kept)."""
    heads = []
    for node in nodes:
        if not isinstance(node, yaml.MappingNode):
            continue
        head = {key: _scalar(y.get(node, key)) for key in ("kind", "apiVersion")}
        if head["apiVersion"] is None:
            head["apiVersion"] = _scalar(y.get(node, "api_version"))
        heads.append({key: None if v is None else str(v) for key, v in head.items()})
    return heads


# -- the role ---------------------------------------------------------------------------


def read_rules(path: Path) -> list[dict[str, Any]] | None:
    """The rules of the (Cluster)Roles of `path`; None when there is none."""
    try:
        documents = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
    except (OSError, yaml.YAMLError):
        return None
    roles = [d for d in documents if is_role(d)]
    if not roles:
        return None
    return [rule for role in roles for rule in role.get("rules") or [] if isinstance(rule, dict)]


def _missing_verbs(rules: list[dict[str, Any]], use: Use) -> list[str]:
    return [verb for verb in use.verbs if not granted(rules, use.group, use.resource, verb)]


def gaps(
    uses: Iterable[Use], rules: list[dict[str, Any]], role_file: str, *, strict: bool = False
) -> list[Finding]:
    """A warning at each task that uses what the role does not allow (an error
    when `strict`: `check --strict`, which `make deploy` runs)."""
    report = error if strict else warning
    findings = []
    for use in sorted(set(uses)):
        missing = _missing_verbs(rules, use)
        if not missing:
            continue
        why = ""
        if set(missing) & set(_DEPENDENT_WATCH) and use.does.endswith("creates or changes"):
            why = " (list and watch: the operator watches what its runs create)"
        findings.append(
            report(
                use.path,
                use.line,
                f"{use.does} {use.shown}, which {role_file} does not allow "
                f"(verbs: {', '.join(missing)}){why}; add a rule there "
                f"(apiGroups: [{use.group!r}], resources: [{use.resource}], "
                f"verbs: [{', '.join(missing)}]) or {FIX}",
            )
        )
    return findings


def missing_rules(uses: Iterable[Use], rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rules to append so that `rules` allow every use: one per group and set
    of verbs, its resources sorted."""
    wanted: dict[tuple[str, str], set[str]] = {}
    for use in uses:
        for verb in _missing_verbs(rules, use):
            wanted.setdefault((use.group, use.resource), set()).add(verb)
    merged: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for (group, resource), verbs in sorted(wanted.items()):
        merged.setdefault((group, tuple(sorted(verbs))), []).append(resource)
    return [
        {"apiGroups": [group], "resources": resources, "verbs": list(verbs)}
        for (group, verbs), resources in merged.items()
    ]
