"""How a run reaches the Kubernetes API.

The seam between the reconciler and the API proxy: the reconciler asks for
access on behalf of an owner and revokes it when the run ends. The proxy
hands each run a kubeconfig with a secret token that identifies its owner
(ansible_operator.proxy.server.ApiProxy is the AccessProvider).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ansible_operator.kube.types import Owner
from ansible_operator.runner.rbac_refusal import Refusals
from ansible_operator.runner.string_fields import Coercions


@dataclass
class RunAccess:
    kubeconfig: dict[str, Any] | None = None  # written privately into the run directory
    env: dict[str, str] = field(default_factory=dict)
    revoke: Callable[[], None] = lambda: None
    # The RBAC refusals the API server answered the run's requests with (the proxy's record).
    refusals: Refusals = field(default_factory=Refusals)
    # The numbers and booleans the proxy sent as strings for it (string_fields.py).
    coercions: Coercions = field(default_factory=Coercions)
    # The conditions the run wrote to its owner's status, by type (the proxy's record).
    owner_conditions: dict[str, dict[str, Any]] = field(default_factory=dict)


class AccessProvider(Protocol):
    # writes=False: the run may only read (an admission run that must not write);
    # owns=False: what it writes is not marked as the owner's, nor followed as its
    # dependents, and its reads are not served from the cache (an admission run);
    # dry_run=True: a preview, whose every write must be a server-side dry run.
    def grant(
        self, owner: Owner, *, writes: bool = True, owns: bool = True, dry_run: bool = False
    ) -> RunAccess: ...
