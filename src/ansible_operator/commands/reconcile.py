"""`ansible-operator reconcile`: run one object's reconcile once, locally.

    ansible-operator reconcile Memcached/mc -n team       # an object already in the cluster
    ansible-operator reconcile -f memcached.yaml          # apply it (it must exist), reconcile it
    ansible-operator reconcile -f memcached.yaml --create # ... creating it if it does not
    ansible-operator reconcile Memcached/mc --check       # a preview: nothing is written
    ansible-operator reconcile Memcached/mc --debugger    # Ansible's task debugger on a failure

The run goes through the same proxy as in the operator (owner references
injected), prints Ansible's own output live, then the conditions. What the
role does is done; the object itself (its status, finalizers, Events) is left
alone unless `--write-status` is given, since an operator in the cluster may be
reconciling it too: the conditions printed are those the run would write.
`--check` is a preview: Ansible in check mode, every write of the run sent as a
server-side dry run (the proxy refuses any other), so defaults and admission
webhooks show in the diffs, which leave out the server's bookkeeping
(managedFields, resourceVersion) and Secret data (reconcile_output.py).
`--debugger` runs Ansible on this terminal (runner/terminal.py) with its
task debugger on: a failed task stops at its prompt, for whoever is there.
An error from the API server or the file is one line naming it; exit 2.
Exit code 0 when the run succeeded, 1 when it failed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from ansible_operator.cluster import connect_config
from ansible_operator.commands.reconcile_output import PreviewOutput
from ansible_operator.controller.reconcile import ObjectKey
from ansible_operator.kube.client import ApiClient, ApiError
from ansible_operator.kube.config import KubeConfig, KubeConfigError
from ansible_operator.kube.discovery import RestMapper
from ansible_operator.kube.impersonation import verify_impersonation
from ansible_operator.kube.types import Resource
from ansible_operator.lint.assigned_vars import assigned_places
from ansible_operator.observability import logs
from ansible_operator.observability.metrics import Metrics
from ansible_operator.project.watch_admission import WatchAdmission
from ansible_operator.project.watches import (
    Watch,
    WatchesError,
    load_watches,
    templated_cluster_data,
)
from ansible_operator.proxy.server import ApiProxy
from ansible_operator.reconciler import conditions
from ansible_operator.reconciler.ansible_reconciler import AnsibleReconciler, Shared
from ansible_operator.runner.configuration import RunMode, RunSpec
from ansible_operator.runner.host import RunnerHost
from ansible_operator.runner.launcher import (
    Launcher,
    ReferenceLauncher,
    StartedRun,
    TerminalLauncher,
)
from ansible_operator.runner.warm.launcher import WarmLauncher
from ansible_operator.settings import AnsibleSettings, RunSettings, Settings, WatchingSettings
from ansible_operator.settings.ansible import facts_skipped
from ansible_operator.settings.flags import add_flags, flag_value

FIELD_MANAGER = "ansible-operator-reconcile"
# The uid a preview (`--check --create`) of an object not yet created runs with.
PREVIEW_UID = "00000000-0000-0000-0000-000000000000"


class ReconcileError(Exception):
    """Something the user must fix before a reconcile can run; the message says what."""


class OneObject:
    """The reconciler's reader (an informer, in the operator): this one object."""

    def __init__(self, obj: dict[str, Any]) -> None:
        self.obj = obj
        self.key = ObjectKey.of(obj)

    def get(self, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self.obj if ObjectKey(namespace or "", name) == self.key else None


def add_reconcile_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "target",
        nargs="?",
        metavar="KIND/NAME",
        help="an object in the cluster, e.g. Memcached/example",
    )
    parser.add_argument(
        "-f",
        "--filename",
        type=Path,
        help="a YAML file with the object: applied to it (as you) before the run; it must "
        "exist unless --create (with --check: run as written, nothing applied)",
    )
    parser.add_argument(
        "--create",
        action="store_true",
        help="with -f: create the object when it does not exist",
    )
    parser.add_argument("-n", "--namespace", help="the object's namespace")
    # The flags `run` has too, declared with its settings.
    add_flags(parser, only=["--watches-file", "--kubeconfig", "--as"])
    parser.add_argument(
        "--runner-mode",
        choices=("reference", "warm"),
        default="reference",
        help="reference (default): one fresh ansible-runner, the least to start for one run; "
        "warm: a warm runner made for this run (less CPU in the play, more to start and stop; "
        "bench/local_reconcile.py compares them)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="a preview: Ansible check mode with diffs, every write sent as a server-side "
        "dry run (any other refused); nothing is written",
    )
    parser.add_argument(
        "--write-status",
        action="store_true",
        help="write the conditions (and finalizers, Events) to the object, as the operator "
        "does; by default they are printed and the object is left alone",
    )
    parser.add_argument(
        "--debugger",
        action="store_true",
        help="open Ansible's task debugger on a failed task, on this terminal (as "
        "`debugger: on_failed`): p task.args, r(edo), c(ontinue), q(uit)",
    )
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="Ansible verbosity (-v ... -vvvvvv)"
    )
    parser.add_argument("--timeout", type=float, default=None, help="run timeout in seconds")


def find_watch(watches: list[Watch], api_version: str | None, kind: str) -> Watch:
    for watch in watches:
        same_kind = watch.gvk.kind.lower() == kind.lower()
        if same_kind and (api_version is None or watch.gvk.api_version == api_version):
            return watch
    known = ", ".join(f"{w.gvk.kind} ({w.gvk.api_version})" for w in watches)
    raise ReconcileError(
        f"no watch for {kind} {api_version or ''} in the watches file; it has: {known}"
    )


def read_object(path: Path) -> dict[str, Any]:
    """The one object of a YAML file; ReconcileError naming the file otherwise."""
    try:
        documents = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
    except OSError as error:
        raise ReconcileError(f"{path}: {error.strerror or error}") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise ReconcileError(f"{where}: not YAML: {getattr(error, 'problem', error)}") from None
    if len(documents) != 1 or not isinstance(documents[0], dict):
        raise ReconcileError(f"{path}: expected exactly one object, found {len(documents)}")
    doc = documents[0]
    if not isinstance(doc.get("metadata"), dict) or not doc["metadata"].get("name"):
        raise ReconcileError(f"{path}: the object has no metadata.name")
    return doc


async def load_target(
    args: argparse.Namespace,
    api: ApiClient,
    mapper: RestMapper,
    watches: list[Watch],
    default_namespace: str,
) -> tuple[Watch, Resource, dict[str, Any]]:
    if args.filename is not None:
        doc = read_object(args.filename)
        watch = find_watch(watches, doc.get("apiVersion"), str(doc.get("kind", "")))
        resource = await mapper.resource_for(watch.gvk.group, watch.gvk.version, watch.gvk.kind)
        metadata = doc["metadata"]
        if resource.namespaced:
            metadata["namespace"] = metadata.get("namespace") or args.namespace or default_namespace
        namespace = metadata.get("namespace") if resource.namespaced else None
        current = await _current(api, resource, metadata["name"], namespace)
        if current is None and not args.create:
            raise ReconcileError(
                f"{_named(watch, metadata['name'], namespace)} does not exist; `reconcile -f` "
                "never creates what you did not ask it to: create it (kubectl apply -f "
                f"{args.filename}) or pass --create"
            )
        if args.check:
            # The object as the API server would store it (defaults, webhooks), stored nowhere.
            previewed = await api.request(
                "PATCH",
                resource.path(namespace, metadata["name"], None),
                body={"apiVersion": resource.api_version, "kind": resource.kind, **doc},
                content_type="application/apply-patch+yaml",
                params={"fieldManager": FIELD_MANAGER, "force": "true", "dryRun": "All"},
            )
            if current is None:  # it has no uid: its dependents' owner references need one
                previewed["metadata"].setdefault("uid", PREVIEW_UID)
            return watch, resource, previewed
        applied = await api.patch(
            resource,
            metadata["name"],
            doc,
            namespace=namespace,
            patch_type="apply",
            field_manager=FIELD_MANAGER,
            force=True,
        )
        return watch, resource, applied
    if not args.target or "/" not in args.target:
        raise ReconcileError("give an object as KIND/NAME, or a file with -f")
    kind, _, name = args.target.partition("/")
    watch = find_watch(watches, None, kind)
    resource = await mapper.resource_for(watch.gvk.group, watch.gvk.version, watch.gvk.kind)
    namespace = (args.namespace or default_namespace) if resource.namespaced else None
    found = await _current(api, resource, name, namespace)
    if found is None:
        raise ReconcileError(f"{_named(watch, name, namespace)} not found")
    return watch, resource, found


def _named(watch: Watch, name: str, namespace: str | None) -> str:
    return f"{watch.gvk.kind} {name}" + (f" in namespace {namespace}" if namespace else "")


async def _current(
    api: ApiClient, resource: Resource, name: str, namespace: str | None
) -> dict[str, Any] | None:
    """The object as it is in the cluster; None when it (or its namespace) is not there."""
    try:
        return await api.get(resource, name, namespace)
    except ApiError as error:
        if error.status == 404:
            if namespace and not await _namespace_exists(api, namespace):
                raise ReconcileError(f"namespace {namespace} does not exist") from None
            return None
        raise


async def _namespace_exists(api: ApiClient, namespace: str) -> bool:
    namespaces = Resource("", "v1", "Namespace", "namespaces", False)
    try:
        await api.get(namespaces, namespace)
    except ApiError as error:
        if error.status == 404:
            return False
        if error.status == 403:
            return True  # not ours to know: say the object is missing
        raise
    return True


def print_conditions(obj: dict[str, Any], title: str = "") -> None:
    found = (obj.get("status") or {}).get("conditions") or []
    if title:
        print(title)
    if not found:
        print("(no conditions)")
        return
    print(f"{'TYPE':<18} {'STATUS':<7} {'REASON':<24} MESSAGE")
    for condition in found:
        print(
            f"{condition.get('type', ''):<18} {condition.get('status', ''):<7} "
            f"{condition.get('reason', ''):<24} {condition.get('message', '')}"
        )


class WouldWrite:
    """What a reconcile that leaves its object alone would have written to it."""

    def __init__(self) -> None:
        self.updates: list[conditions.Condition] = []
        self.other: list[str] = []

    def __call__(self, what: str, detail: Any) -> None:
        if what == "status":
            self.updates += detail
        elif what == "Event":
            kind, reason, message = detail
            self.other.append(f"Event {kind} {reason}: {message}")
        else:
            self.other.append(f"{what}: {detail}")

    def show(self, obj: dict[str, Any]) -> None:
        status = obj.get("status") or {}
        merged = conditions.merge_conditions(status.get("conditions"), self.updates)
        print_conditions(
            {"status": {"conditions": merged}},
            "conditions this run would write (not written: pass --write-status to write them):",
        )
        for line in self.other:
            print(f"would write {line}")


class BegunLauncher:
    """The run's launcher, begun before the host starts: the warm runner
    imports Ansible (seconds) while the object is read and the proxy starts."""

    def __init__(self, launcher: Launcher) -> None:
        self.launcher = launcher
        launcher.begin()

    def begin(self) -> None:
        pass  # begun already

    async def mode(self) -> RunMode:
        return await self.launcher.mode()

    async def start(self, spec: RunSpec) -> StartedRun:
        return await self.launcher.start(spec)

    async def stop(self) -> None:
        await self.launcher.stop()


def launcher_of(
    args: argparse.Namespace, settings: Settings, watches: list[Watch], scratch: Path
) -> Launcher:
    """How the run starts: on this terminal (--debugger), forked from a warm
    runner made for it (--runner-mode warm: Ansible and the modules' imports
    start at once, beside the command's own work), or afresh."""
    if args.debugger:
        return TerminalLauncher()
    if settings.runs.runner_mode != "warm":
        return ReferenceLauncher()
    targets = []
    for watch in watches:
        if watch.playbook is not None:
            targets.append({"playbook": str(watch.playbook)})
        elif watch.role is not None:
            targets.append({"role": str(watch.role)})
    return WarmLauncher(settings=settings, scratch=scratch, metrics=Metrics(), targets=targets)


def settings_of(args: argparse.Namespace) -> Settings:
    return Settings(
        watching=WatchingSettings(
            watches_file=flag_value(args, "--watches-file"),
            kubeconfig=flag_value(args, "--kubeconfig"),
            impersonate=flag_value(args, "--as"),
        ),
        ansible=AnsibleSettings(
            verbosity=args.verbose,
            log_events="nothing",
            check_mode=args.check,
            skip_facts=facts_skipped(os.environ),
        ),
        runs=RunSettings(run_timeout=args.timeout, runner_mode=args.runner_mode),
    )


async def reconcile_once(args: argparse.Namespace) -> int:
    if args.check and args.write_status:
        raise ReconcileError("--check writes nothing: --write-status cannot go with it")
    if args.create and args.filename is None:
        raise ReconcileError("--create goes with -f FILE")
    settings = settings_of(args)
    watching = settings.watching
    watches = load_watches(watching.watches_file, cwd=Path.cwd())
    for warning in templated_cluster_data(watches):
        print(f"ansible-operator: warning: {warning}", file=sys.stderr)
    config = connect_config(watching.kubeconfig)
    with tempfile.TemporaryDirectory(prefix="ansible-operator-reconcile-") as scratch:
        async with contextlib.AsyncExitStack() as begun:
            launcher = BegunLauncher(launcher_of(args, settings, watches, Path(scratch)))
            begun.push_async_callback(launcher.stop)
            return await _reconcile(args, settings, watches, config, launcher, Path(scratch))


async def _reconcile(
    args: argparse.Namespace,
    settings: Settings,
    watches: list[Watch],
    config: KubeConfig,
    launcher: Launcher,
    scratch: Path,
) -> int:
    watching = settings.watching
    would_write = None if args.write_status else WouldWrite()
    async with ApiClient(config) as api:
        mapper = RestMapper(api)
        # The object (`-f`) is applied as you, as `kubectl apply` would; the
        # reconcile is the operator's, so `--as` takes effect from here on.
        watch, resource, obj = await load_target(
            args, api, mapper, watches, config.namespace or "default"
        )
        if watching.impersonate:
            config.impersonate = watching.impersonate
            await verify_impersonation(api)
        if args.debugger:
            print(
                "ansible-operator: Ansible's task debugger opens on a failed task: "
                "p task.name, p task.args, p task_vars['x'], r (redo), c (continue), q (quit)",
                flush=True,
            )
        # Started in order, stopped in reverse, as the manager's parts.
        async with contextlib.AsyncExitStack() as started:
            proxy = ApiProxy(config, mapper, port=0)
            await proxy.start()
            started.push_async_callback(proxy.stop)
            metrics = Metrics()
            host = RunnerHost(
                settings=settings,
                access=proxy,
                runner_root=scratch / "runs",
                scratch=scratch,
                metrics=metrics,
                max_runs=1,
                contain=False,  # the command ends with its run: nothing outlives it
                launcher=launcher,
                # With the debugger, the run shows its output on the terminal itself.
                live_output=None if args.debugger else _print_output,
                shown=PreviewOutput() if args.check else None,
            )
            await host.start()
            started.push_async_callback(host.stop)
            admission = WatchAdmission(Path.cwd(), os.environ, assigned=assigned_places)
            started.push_async_callback(admission.stop)
            shared = Shared(
                api=api,
                settings=settings,
                metrics=metrics,
                runner=host,
                admission=admission,
                would_write=would_write,
            )
            metadata = obj["metadata"]
            reader = OneObject(obj)
            reconciler = AnsibleReconciler(watch, resource, reader, shared)
            result = (await reconciler.reconcile(reader.key)).run
        print()
        if would_write is not None:
            would_write.show(obj)
        else:
            try:
                print_conditions(
                    await api.get(resource, metadata["name"], metadata.get("namespace"))
                )
            except ApiError as error:
                if error.status != 404:
                    raise
                print(f"{watch.gvk.kind} {metadata['name']} is gone (finalizer done)")
        if result is None:
            print("no run happened (nothing to do for this object)")
            return 0
        verdict = "succeeded" if result.succeeded else f"FAILED: {result.message}"
        mode = " (preview: nothing was written)" if args.check else ""
        print(f"reconcile of {watch.gvk.kind} {metadata['name']} {verdict}{mode}")
        return 0 if result.succeeded else 1


def _not_the_failure_again(record: logging.LogRecord) -> bool:
    """The operator's own line for a failed reconcile: the command prints the run's
    failure, the conditions and its verdict already, and one more copy only buries them."""
    return not str(record.msg).startswith("reconcile failed ")


def reconcile(args: argparse.Namespace) -> int:
    logs.configure(logging.WARNING)
    logging.getLogger("ansible_operator.controller").addFilter(_not_the_failure_again)
    try:
        return asyncio.run(reconcile_once(args))
    except (ReconcileError, WatchesError, KubeConfigError) as error:
        print(f"ansible-operator: {error}", file=sys.stderr)
    except ApiError as error:
        print(f"ansible-operator: reconcile: the API server answered {one_line(str(error))}",
              file=sys.stderr)  # fmt: skip
    except (aiohttp.ClientError, OSError) as error:
        print(f"ansible-operator: reconcile: cannot reach the API server: {one_line(str(error))}",
              file=sys.stderr)  # fmt: skip
    return 2


def _print_output(text: str) -> None:
    if text:
        print(text, flush=True)


def one_line(text: str) -> str:
    return " ".join(text.split())
