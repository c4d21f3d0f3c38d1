"""`ansible-operator reconcile`: run one object's reconcile once, locally.

    ansible-operator reconcile -f memcached.yaml          # apply it, then reconcile it
    ansible-operator reconcile Memcached/mc -n team       # an object already in the cluster
    ansible-operator reconcile -f memcached.yaml --check  # check mode, with diffs; writes nothing

The run goes through the same proxy as in the operator (owner references
injected), prints Ansible's own output live, then the object's conditions.
Exit code 0 when the run succeeded.
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

import yaml

from ansible_operator.cluster import connect_config
from ansible_operator.controller.reconcile import ObjectKey
from ansible_operator.kube.client import ApiClient, ApiError
from ansible_operator.kube.config import KubeConfigError
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
from ansible_operator.reconciler.ansible_reconciler import AnsibleReconciler, Shared
from ansible_operator.runner.host import RunnerHost
from ansible_operator.settings import AnsibleSettings, RunSettings, Settings, WatchingSettings
from ansible_operator.settings.ansible import facts_skipped
from ansible_operator.settings.flags import add_flags, flag_value

FIELD_MANAGER = "ansible-operator-reconcile"


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
    parser.add_argument("-f", "--filename", type=Path, help="a YAML file with the object")
    parser.add_argument("-n", "--namespace", help="the object's namespace")
    # The flags `run` has too, declared with its settings.
    add_flags(parser, only=["--watches-file", "--kubeconfig", "--as"])
    parser.add_argument(
        "--check", action="store_true", help="Ansible check mode with diffs; nothing is written"
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


async def load_target(
    args: argparse.Namespace,
    api: ApiClient,
    mapper: RestMapper,
    watches: list[Watch],
    default_namespace: str,
) -> tuple[Watch, Resource, dict[str, Any]]:
    if args.filename is not None:
        documents = [d for d in yaml.safe_load_all(args.filename.read_text()) if d]
        if len(documents) != 1 or not isinstance(documents[0], dict):
            raise ReconcileError(f"{args.filename}: expected exactly one object")
        doc = documents[0]
        watch = find_watch(watches, doc.get("apiVersion"), str(doc.get("kind", "")))
        resource = await mapper.resource_for(watch.gvk.group, watch.gvk.version, watch.gvk.kind)
        metadata = doc.setdefault("metadata", {})
        if resource.namespaced:
            metadata["namespace"] = (
                metadata.get("namespace") or args.namespace or (default_namespace)
            )
        namespace = metadata.get("namespace") if resource.namespaced else None
        if args.check:
            try:
                current = await api.get(resource, metadata["name"], namespace)
                metadata.setdefault("uid", current["metadata"]["uid"])
            except ApiError as error:
                if error.status != 404:
                    raise
                metadata.setdefault("uid", "00000000-0000-0000-0000-000000000000")
            return watch, resource, doc
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
    try:
        return watch, resource, await api.get(resource, name, namespace)
    except ApiError as error:
        if error.status == 404:
            raise ReconcileError(
                f"{watch.gvk.kind} {name} not found"
                + (f" in namespace {namespace}" if namespace else "")
            ) from None
        raise


def print_conditions(obj: dict[str, Any]) -> None:
    conditions = (obj.get("status") or {}).get("conditions") or []
    if not conditions:
        print("(no conditions)")
        return
    print(f"{'TYPE':<14} {'STATUS':<7} {'REASON':<20} MESSAGE")
    for condition in conditions:
        print(
            f"{condition.get('type', ''):<14} {condition.get('status', ''):<7} "
            f"{condition.get('reason', ''):<20} {condition.get('message', '')}"
        )


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
        # One run: a warm runner would cost more than it saves.
        runs=RunSettings(run_timeout=args.timeout, runner_mode="reference"),
    )


async def reconcile_once(args: argparse.Namespace) -> int:
    settings = settings_of(args)
    watching = settings.watching
    watches = load_watches(watching.watches_file, cwd=Path.cwd())
    for warning in templated_cluster_data(watches):
        print(f"ansible-operator: warning: {warning}", file=sys.stderr)
    config = connect_config(watching.kubeconfig)
    with tempfile.TemporaryDirectory(prefix="ansible-operator-reconcile-") as scratch:
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
            # Started in order, stopped in reverse, as the manager's parts.
            async with contextlib.AsyncExitStack() as started:
                proxy = ApiProxy(config, mapper, port=0)
                await proxy.start()
                started.push_async_callback(proxy.stop)
                metrics = Metrics()
                host = RunnerHost(
                    settings=settings,
                    access=proxy,
                    runner_root=Path(scratch) / "runs",
                    scratch=Path(scratch),
                    metrics=metrics,
                    max_runs=1,
                    contain=False,  # the command ends with its run: nothing outlives it
                    live_output=lambda text: print(text, flush=True),
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
                )
                metadata = obj["metadata"]
                reader = OneObject(obj)
                reconciler = AnsibleReconciler(watch, resource, reader, shared)
                result = (await reconciler.reconcile(reader.key)).run
            print()
            if not args.check:
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
            mode = " (check mode: nothing was written)" if args.check else ""
            print(f"reconcile of {watch.gvk.kind} {metadata['name']} {verdict}{mode}")
            return 0 if result.succeeded else 1


def reconcile(args: argparse.Namespace) -> int:
    logs.configure(logging.WARNING)
    try:
        return asyncio.run(reconcile_once(args))
    except (ReconcileError, WatchesError, KubeConfigError) as error:
        print(f"ansible-operator: {error}", file=sys.stderr)
        return 2
