"""A task the API server refused for RBAC (403), said as what to change.

kubernetes.core's modules fail with the API server's Status in their message
(`Failed to create object: b'{"kind":"Status",...}'`: JSON in a bytes repr, its
quotes escaped once or twice). The Status message names the user, the verb, the
resource, its group and the namespace; we say the same in one sentence that
names the file granting the operator's permissions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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

    def describe(self) -> str:
        what = f"{self.group}/{self.resource}" if self.group else self.resource
        where = f"in namespace {self.namespace}" if self.namespace else "at the cluster scope"
        return (
            f"forbidden: the operator's identity {self.user} may not {self.verb} {what} "
            f"{where}; allow it in {RBAC_FILE} (or run ansible-operator check --fix-rbac)"
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
