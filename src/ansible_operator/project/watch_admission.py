"""Admission (admission.py) for the watches of an operator: the names each run's
target may not receive from the cluster, known before the first run.

Ansible's names are read from the installed ansible-core in a child process once
(ansible_names.py), started when the operator starts; the names each role or playbook
assigns itself are read from its YAML once per target (lint/assigned_vars.py, given as
`assigned`), less the watch's `specMayOverride`. Admitting an object reads YAML with
Ansible's loader: it runs in a thread, off the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ansible_operator.project import admission, ansible_names, ansible_view
from ansible_operator.project.admission import ObjectRules, RunVariables
from ansible_operator.project.ansible_view import ExtraVars
from ansible_operator.project.reserved_vars import ReservedNames
from ansible_operator.project.watches import Watch

# A run's target: (role, playbook), as `Watch.target` gives it.
_Target = tuple[Path | None, Path | None]
# The names a target assigns itself, each with where (lint/assigned_vars.py's
# `assigned_places`; given by the layer that composes the operator).
ReadAssigned = Callable[[Path | None, Path | None, Path, Mapping[str, str]], Mapping[str, str]]


class WatchAdmission:
    def __init__(
        self,
        directory: Path,
        env: Mapping[str, str],
        *,
        names: ansible_names.AnsibleNames | None = None,  # given: no child process (tests)
        read_back: Callable[[dict[str, Any]], ExtraVars] = ansible_view.read_exactly,
        assigned: ReadAssigned | None = None,
    ) -> None:
        self.directory = directory
        self.env = dict(env)
        self._names = names
        self._read_back = read_back
        self._read_assigned_names = assigned
        self._reading: asyncio.Task[ansible_names.AnsibleNames] | None = None
        self._assigned: dict[_Target, dict[str, str]] = {}

    def start(self) -> None:
        """Start reading ansible-core's names (the first admission waits for them)."""
        if self._names is None and self._reading is None:
            self._reading = asyncio.ensure_future(ansible_names.read_reserved_by_ansible(self.env))

    async def names(self) -> ansible_names.AnsibleNames:
        if self._names is None:
            self.start()
            assert self._reading is not None
            reading = self._reading
            try:
                self._names = await asyncio.shield(reading)
            except RuntimeError:
                if self._reading is reading:
                    self._reading = None  # the next admission asks again
                raise
        return self._names

    async def rules(self, watch: Watch, *, deleting: bool) -> ObjectRules:
        names = await self.names()
        target = watch.target(deleting=deleting)
        assigned = self._assigned.get(target)
        if assigned is None:
            assigned = await asyncio.to_thread(self._read_assigned, *target)
            self._assigned[target] = assigned
        allowed = set(watch.spec_may_override)
        return ObjectRules(
            group=watch.gvk.group,
            kind=watch.gvk.kind,
            snake_case=watch.snake_case_parameters,
            mark_unsafe=watch.mark_unsafe,
            reserved=ReservedNames(
                names.names,
                names.version,
                {name: where for name, where in assigned.items() if name not in allowed},
            ),
            read_back=self._read_back,
        )

    def _read_assigned(self, role: Path | None, playbook: Path | None) -> dict[str, str]:
        if self._read_assigned_names is None:
            return {}
        return dict(self._read_assigned_names(role, playbook, self.directory, self.env))

    async def admit(self, watch: Watch, obj: Mapping[str, Any], *, deleting: bool) -> RunVariables:
        """The run's variables for `obj` (RefusedData: it may not run)."""
        rules = await self.rules(watch, deleting=deleting)
        finalizer = watch.finalizer if deleting else None
        return await asyncio.to_thread(
            admission.admit_object,
            obj,
            rules,
            watch_vars=watch.vars,
            finalizer_vars=finalizer.vars if finalizer is not None else None,
        )

    async def stop(self) -> None:
        if self._reading is not None and not self._reading.done():
            self._reading.cancel()
