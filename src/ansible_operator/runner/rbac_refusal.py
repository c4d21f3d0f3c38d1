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

import datetime
import json
import re
import time
from dataclasses import dataclass, field

RBAC_FILE = "config/rbac/role.yaml"
# A quote as the message carries it: bare, or escaped by JSON, then by a repr.
_Q = r'\\*"'
_REFUSAL = re.compile(
    rf"User {_Q}(?P<user>[^\"\\]+){_Q} cannot (?P<verb>[a-z]+) resource "
    rf"{_Q}(?P<resource>[^\"\\]+){_Q} in API group {_Q}(?P<group>[^\"\\]*){_Q} "
    rf"(?:in the namespace {_Q}(?P<namespace>[^\"\\]+){_Q}|at the cluster scope)"
)
# Refusals a run's record keeps (a role looping over thousands of refused
# requests says no more with the rest).
MAX_RECORDED = 100
# Seconds either side of a task's times (each rounded to the microsecond).
SLACK = 0.01


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


@dataclass
class Refusals:
    """The RBAC refusals the API server answered a run's requests with, as the
    proxy saw them, each with the wall-clock time it came (what a failed task's
    start and end are compared with)."""

    seen: list[tuple[float, RbacRefusal]] = field(default_factory=list)

    def add(self, refusal: RbacRefusal, at: float | None = None) -> None:
        if len(self.seen) < MAX_RECORDED:
            self.seen.append((time.time() if at is None else at, refusal))

    def between(self, start: object, end: object) -> list[RbacRefusal]:
        """Those that came while a task ran (its event's `start` and `end`, ISO
        times); every one when the task's times are not known."""
        begun, ended = _moment(start), _moment(end)
        if begun is None or ended is None:
            return [refusal for _, refusal in self.seen]
        return [refusal for at, refusal in self.seen if begun - SLACK <= at <= ended + SLACK]


def _moment(value: object) -> float | None:
    if isinstance(value, datetime.datetime):
        moment = value
    elif isinstance(value, str) and value:
        try:
            moment = datetime.datetime.fromisoformat(value)
        except ValueError:
            return None
    else:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp()
