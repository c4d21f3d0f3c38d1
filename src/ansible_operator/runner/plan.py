"""What one run plays, for whom, and where: the one shape every caller hands the runner.

The caller names the run (`ident`, from `new_ident()`), as ansible-runner's
`run(ident=...)` and Operator SDK's `Run(ident, ...)` do: its artifacts are
`<runner root>/<subject>/artifacts/<ident>`, and the caller can say which run
it means before the run has started, while it runs and after it ended.
"""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ansible_operator.kube.types import Owner
from ansible_operator.project.ansible_view import ExtraVars
from ansible_operator.runner import priority

_counter = itertools.count(1)


def new_ident() -> str:
    """A run's name: unique in this process, and across restarts."""
    return f"{next(_counter)}-{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True, kw_only=True)
class RunPlan:
    ident: str  # the run's name, chosen by the caller (new_ident())
    owner: Owner  # whom the proxy grant acts for
    described: str  # the run's subject as log lines name it
    subject: Path  # relative to the runner root; artifacts in <subject>/artifacts/<ident>
    role: Path | None
    playbook: Path | None
    extravars: dict[str, Any]  # the author's (templated), written as JSON
    # The cluster's data, never templated, as admission read it back through Ansible's
    # loader (project/admission.py); None when the run has none.
    cluster_vars: ExtraVars | None = None
    verbosity: int
    timeout: float | None
    keep_artifacts: int  # artifact directories of the subject kept after the run (0: none)
    skip_facts: bool
    ansible_args: str = ""
    writes: bool = True  # False: a grant that may only read through the proxy
    # True: a preview (`reconcile --check`): every write must be a server-side dry run.
    dry_run: bool = False
    owns: bool = True  # False: what the run writes is not marked as its owner's (admission)
    nice: int = priority.RECONCILE  # how far its processes yield the CPU (priority.py)
    # Holds one of the host's run slots (the operator's cap on concurrent runs),
    # counted in flight and timed under `label`. Admission runs are not capped
    # here: their webhooks share slots of their own between clients.
    capped: bool = True
    label: str = ""  # the metrics label of the run's subject (group/version/kind)
    # Runs of this subject may overlap (admission runs): their artifacts are
    # rotated by the host after each run, never those of a run still going.
    shares_subject: bool = False
