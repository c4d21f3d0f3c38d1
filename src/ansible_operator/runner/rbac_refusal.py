"""A request the API server refused for RBAC (403), said as what to change.

kubernetes.core's modules fail with the API server's Status in their message
(`Failed to create object: b'{"kind":"Status",...}'`: JSON in a bytes repr, its
quotes escaped once or twice). The Status message names the user, the verb, the
resource, its group and the namespace; we say the same in one sentence that
names the file granting the operator's permissions and the rule to add there.

A task under `no_log: true` fails with Ansible's "output has been hidden"
only; the operator's API proxy saw the refusal all the same, and records it for
the run (`Refusals`, with the time it came): the task's failure then says what
was refused, from the proxy's record, in the same sentence (no value of the
task is shown, only what the API server denied).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from ansible_operator.runner.proxy_record import Timeline

RBAC_FILE = "config/rbac/role.yaml"
# A quote as the message carries it: bare, or escaped by JSON, then by a repr.
_Q = r'\\*"'
_REFUSAL = re.compile(
    rf"User {_Q}(?P<user>[^\"\\]+){_Q} cannot (?P<verb>[a-z]+) resource "
    rf"{_Q}(?P<resource>[^\"\\]+){_Q} in API group {_Q}(?P<group>[^\"\\]*){_Q} "
    rf"(?:in the namespace {_Q}(?P<namespace>[^\"\\]+){_Q}|at the cluster scope)"
)


@dataclass(frozen=True)
class RbacRefusal:
    user: str
    verb: str
    group: str
    resource: str  # plural, with its subresource: `deployments/scale`
    namespace: str  # "" at the cluster scope

    @property
    def what(self) -> str:
        return f"{self.group}/{self.resource}" if self.group else self.resource

    @property
    def where(self) -> str:
        return f"in namespace {self.namespace}" if self.namespace else "at the cluster scope"

    def rule(self) -> str:
        """The role.yaml rule that allows it, in YAML's flow style."""
        return (
            f"{{apiGroups: [{json.dumps(self.group)}], resources: [{self.resource}], "
            f"verbs: [{self.verb}]}}"
        )

    def refused(self) -> str:
        """What was refused: `may not create secrets in namespace team`."""
        return f"the operator's identity {self.user} may not {self.verb} {self.what} {self.where}"

    def describe(self) -> str:
        return (
            f"forbidden: {self.refused()}; add the rule {self.rule()} to {RBAC_FILE} "
            "(`ansible-operator check --fix-rbac` adds those it can see in the roles)"
        )


def describe_all(refusals: list[RbacRefusal]) -> str:
    """One sentence for one refusal; for several, each refused thing, then each rule."""
    unique = list(dict.fromkeys(refusals))
    if len(unique) == 1:
        return unique[0].describe()
    return (
        f"forbidden: {'; '.join(r.refused() for r in unique)}; add the rules "
        f"{', '.join(r.rule() for r in unique)} to {RBAC_FILE} "
        "(`ansible-operator check --fix-rbac` adds those it can see in the roles)"
    )


def rbac_refusal(message: str) -> RbacRefusal | None:
    """The refusal an API server's 403 message states, if `message` holds one."""
    found = _REFUSAL.search(message)
    if found is None:
        return None
    return RbacRefusal(
        user=found["user"],
        verb=found["verb"],
        group=found["group"],
        resource=found["resource"],
        namespace=found["namespace"] or "",
    )


def refusal_in_answer(body: bytes | None) -> RbacRefusal | None:
    """The refusal a 403 answer's Status body states, if it is an RBAC refusal."""
    if not body:
        return None
    try:
        status = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(status, dict) or not isinstance(status.get("message"), str):
        return None
    return rbac_refusal(status["message"])


class Refusals(Timeline[RbacRefusal]):
    """The RBAC refusals the API server answered a run's requests with, as the
    proxy saw them, each with the time it came (proxy_record.py)."""
