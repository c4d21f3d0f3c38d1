"""`- webhook:` entries of watches.yaml: read strictly, every mistake at its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_operator.project.watches import WatchesError, load_watches, load_watches_file
from ansible_operator.project.webhook_entries import Webhook, WebhookRule

HOOK = """\
- webhook:
    name: check.example.com
    type: validating
    rules:
      - apiGroups: [""]
        apiVersions: [v1]
        resources: [configmaps]
        operations: [CREATE, UPDATE]
    role: check
"""


def load(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> list[Webhook]:
    for role in ("check", "app"):
        (tmp_path / "roles" / role / "tasks").mkdir(parents=True, exist_ok=True)
    (tmp_path / "hook.yml").write_text("- hosts: localhost\n")
    path = tmp_path / "watches.yaml"
    path.write_text(text)
    return load_watches_file(path, env=env or {}, cwd=tmp_path).webhooks


def errors(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(WatchesError) as info:
        load(tmp_path, text)
    return info.value.problems


def test_defaults(tmp_path: Path) -> None:
    [hook] = load(tmp_path, HOOK)
    assert hook == Webhook(
        name="check.example.com",
        type="validating",
        rules=(WebhookRule(("",), ("v1",), ("configmaps",), ("CREATE", "UPDATE"), "*"),),
        role=(tmp_path / "roles" / "check").resolve(),
        playbook=None,
        vars={},
        namespace_selector=None,
        object_selector=None,
        failure_policy="Fail",
        timeout_seconds=10,
        side_effects="None",
        reinvocation_policy="Never",
        max_runner_artifacts=20,
        source=f"{tmp_path / 'watches.yaml'}:1",
    )
    assert hook.path == "/validate/check.example.com"
    assert not hook.may_write(dry_run=False)


def test_every_field(tmp_path: Path) -> None:
    [hook] = load(
        tmp_path,
        """\
- WebHook:
    name: rewrite.example.com
    type: mutating
    rules:
      - apiGroups: [""]
        apiVersions: [v1]
        resources: [pods]
        operations: ["*"]
        scope: Namespaced
      - {apiGroups: [apps], apiVersions: [v1], resources: [deployments/scale], operations: [UPDATE]}
    playbook: hook.yml
    role: ignored-when-a-playbook-is-given
    vars: {registry: "{{ lookup('env', 'REGISTRY') }}"}
    namespaceSelector:
      matchLabels: {rewrite: "on"}
      matchExpressions: [{key: tier, operator: NotIn, values: [system]}]
    objectSelector: {matchExpressions: [{key: skip, operator: DoesNotExist}]}
    failurePolicy: Ignore
    timeoutSeconds: 30
    sideEffects: NoneOnDryRun
    reinvocationPolicy: IfNeeded
    maxRunnerArtifacts: 0
""",
    )
    assert hook.mutating and hook.path == "/mutate/rewrite.example.com"
    assert hook.rules[0] == WebhookRule(("",), ("v1",), ("pods",), ("*",), "Namespaced")
    assert hook.rules[1].resources == ("deployments/scale",)
    assert hook.playbook == (tmp_path / "hook.yml").resolve() and hook.role is None
    assert hook.vars == {"registry": "{{ lookup('env', 'REGISTRY') }}"}
    assert hook.namespace_selector == {
        "matchLabels": {"rewrite": "on"},
        "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["system"]}],
    }
    assert hook.object_selector == {
        "matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]
    }
    assert (hook.failure_policy, hook.timeout_seconds) == ("Ignore", 30)
    assert (hook.side_effects, hook.reinvocation_policy) == ("NoneOnDryRun", "IfNeeded")
    assert hook.max_runner_artifacts == 0
    assert hook.may_write(dry_run=False) and not hook.may_write(dry_run=True)


def test_webhooks_and_watches_share_the_file(tmp_path: Path) -> None:
    text = "- {version: v1, group: example.com, kind: App, role: app}\n" + HOOK
    loaded = load_watches_file(_written(tmp_path, text), env={}, cwd=tmp_path)
    assert [watch.gvk.kind for watch in loaded.watches] == ["App"]
    assert [hook.name for hook in loaded.webhooks] == ["check.example.com"]
    # The watches alone, for callers that run no webhooks; the webhooks are still checked.
    assert len(load_watches(tmp_path / "watches.yaml", env={}, cwd=tmp_path)) == 1
    broken = _written(tmp_path, text.replace("type: validating", "type: checking"))
    with pytest.raises(WatchesError, match="'type' must be mutating or validating"):
        load_watches(broken, env={}, cwd=tmp_path)


def _written(tmp_path: Path, text: str) -> Path:
    load(tmp_path, HOOK)  # the roles
    path = tmp_path / "watches.yaml"
    path.write_text(text)
    return path


def test_environment_is_expanded_as_in_watches(tmp_path: Path) -> None:
    text = HOOK + "    failurePolicy: $POLICY\n    timeoutSeconds: $TIMEOUT\n"
    [hook] = load(tmp_path, text, env={"POLICY": "Ignore", "TIMEOUT": "3"})
    assert (hook.failure_policy, hook.timeout_seconds) == ("Ignore", 3)


def with_line(text: str, replace: str, by: str) -> str:
    assert replace in text
    return text.replace(replace, by)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            HOOK.replace("check.example.com", "check"),
            "watches.yaml:2: webhook: 'name' must be a lower-case domain of at least three "
            "parts, as Kubernetes requires (e.g. image-rewrite.example.com), not 'check'",
        ),
        (
            HOOK.replace("check.example.com", "Check.Example.com"),
            "watches.yaml:2: webhook: 'name' must be a lower-case domain",
        ),
        (
            HOOK.replace("    name: check.example.com\n", ""),
            "watches.yaml:2: webhook: 'name' is required (e.g. name: check.example.com)",
        ),
        (
            HOOK.replace("validating", "Validating"),
            "watches.yaml:3: 'type' must be mutating or validating, not 'Validating' "
            "(did you mean 'validating'?)",
        ),
        (
            HOOK.replace("    type: validating\n", ""),
            "watches.yaml:2: webhook: 'type' is required (mutating or validating)",
        ),
        (
            HOOK.replace("    role: check\n", ""),
            "watches.yaml:2: webhook: needs a 'role' or a 'playbook'",
        ),
        (
            HOOK.replace("role: check", "role: missing"),
            "watches.yaml:9: 'webhook.role': role 'missing' not found; looked in: ",
        ),
        (
            HOOK.replace("role: check", "rol: check"),
            "watches.yaml:9: webhook: unknown key 'rol' (did you mean 'role'?)",
        ),
        (
            HOOK + "    failurePolicy: fail\n",
            "watches.yaml:10: 'failurePolicy' must be Fail or Ignore, not 'fail' "
            "(did you mean 'Fail'?)",
        ),
        (
            HOOK + "    sideEffects:\n",
            "watches.yaml:10: 'sideEffects' must be None or NoneOnDryRun, not null "
            "(write the word None; an empty value or null is no value)",
        ),
        (
            HOOK + "    sideEffects: Some\n",
            "watches.yaml:10: 'sideEffects' must be None or NoneOnDryRun, not 'Some'",
        ),
        (
            HOOK + "    timeoutSeconds: 31\n",
            "watches.yaml:10: 'timeoutSeconds' must be at most 30, not 31",
        ),
        (
            HOOK + "    timeoutSeconds: 0\n",
            "watches.yaml:10: 'timeoutSeconds' must be positive, not 0",
        ),
        (
            HOOK + "    timeoutSeconds: 5s\n",
            "watches.yaml:10: 'timeoutSeconds' must be an integer, not '5s'",
        ),
        (
            HOOK + "    reinvocationPolicy: IfNeeded\n",
            "watches.yaml:10: webhook: 'reinvocationPolicy' is for mutating webhooks only",
        ),
        (
            HOOK + "    namespaceSelector: [a]\n",
            "watches.yaml:10: 'namespaceSelector' must be a mapping, not a list",
        ),
        (
            HOOK + "    objectSelector: {matchLabel: {a: b}}\n",
            "watches.yaml:10: objectSelector: unknown key 'matchLabel' (did you mean "
            "'matchLabels'?)",
        ),
        (
            HOOK + "    objectSelector: {matchExpressions: [{key: a, operator: Is}]}\n",
            "watches.yaml:10: 'operator' must be one of In, NotIn, Exists, DoesNotExist, not 'Is'",
        ),
        (
            HOOK.replace("    rules:\n", "    rules: []\n    oldrules:\n"),
            "watches.yaml:4: webhook: 'rules' must be a non-empty list of {apiGroups, "
            "apiVersions, resources, operations}, not a list",
        ),
        (
            HOOK.replace("        operations: [CREATE, UPDATE]\n", ""),
            "watches.yaml:5: 'rules' entry: 'operations' is required",
        ),
        (
            HOOK.replace("[CREATE, UPDATE]", "[CREATE, PATCH]"),
            "watches.yaml:8: 'operations' must be among CREATE, UPDATE, DELETE, CONNECT, *, "
            "not 'PATCH'",
        ),
        (
            HOOK.replace("[configmaps]", "configmaps"),
            "watches.yaml:7: 'resources' must be a non-empty list of strings (e.g. [pods], "
            "[deployments/scale]), not 'configmaps'",
        ),
        (
            HOOK.replace("[v1]", '[""]'),
            "watches.yaml:6: 'apiVersions' must be a non-empty list of strings (e.g. [v1]), "
            "not ['']",
        ),
        (
            HOOK.replace("    role: check\n", "        scope: Global\n    role: check\n"),
            "watches.yaml:9: 'scope' must be Cluster or Namespaced or *, not 'Global'",
        ),
        (
            HOOK.replace("        resources:", "        resource: [pods]\n        resources:"),
            "watches.yaml:7: rules entry: unknown key 'resource' (did you mean 'resources'?)",
        ),
        (
            HOOK + "  role: check\n",
            "watches.yaml:10: webhook entry: unknown key 'role'; known keys: webhook",
        ),
        (
            "- webhook: check.example.com\n",
            "watches.yaml:1: 'webhook' must be a mapping with name, type, rules and a role or "
            "playbook, not 'check.example.com'",
        ),
        (
            HOOK + HOOK.replace("role: check", "role: app"),
            "watches.yaml:10: duplicate webhook 'check.example.com': already defined at ",
        ),
    ],
)
def test_mistakes_name_the_line_and_the_key(tmp_path: Path, text: str, expected: str) -> None:
    found = errors(tmp_path, text)
    assert any(problem.endswith(expected) or expected in problem for problem in found), found
    assert all(problem.startswith(str(tmp_path / "watches.yaml") + ":") for problem in found)


def test_every_mistake_of_an_entry_at_once(tmp_path: Path) -> None:
    text = (
        HOOK.replace("check.example.com", "check")
        .replace("validating", "checking")
        .replace("[CREATE, UPDATE]", "[GET]")
        + "    timeoutSeconds: 99\n"
    )
    found = errors(tmp_path, text)
    assert [problem.split(":")[1] for problem in found] == ["2", "3", "8", "10"]
