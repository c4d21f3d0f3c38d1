"""`ansible-operator migrate KIND`: rewrite every stored object of a kind in its CRD's
storage version, then drop the other versions from `status.storedVersions`
(conversion/migration.py). Progress is printed as it goes and kept in the CRD, so a run
that is interrupted is resumed by the next one. Objects stored in another version are read
through the conversion webhook: the operator serving it must be running."""

from __future__ import annotations

import argparse
import asyncio
import sys

from ansible_operator.cluster import connect_config
from ansible_operator.conversion.migration import (
    MigrationError,
    Outcome,
    Progress,
    find_crd,
    migrate,
    storage_version,
)
from ansible_operator.kube.client import ApiClient, ApiError
from ansible_operator.kube.config import KubeConfigError
from ansible_operator.settings.flags import add_flags, flag_value


def add_migrate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "kind",
        help="the kind: its CRD's name (harborclusters.goharbor.io), Kind.group, or a kind "
        "one CRD alone serves",
    )
    add_flags(parser, only=["--kubeconfig"])


def _shown(progress: Progress) -> None:
    of = f"/{progress.total}" if progress.total is not None else ""
    print(
        f"  {progress.migrated}{of} objects ({progress.written} rewritten in "
        f"{progress.storage_version}); last {progress.last or '-'}",
        flush=True,
    )


async def _migrate(args: argparse.Namespace) -> Outcome:
    config = connect_config(flag_value(args, "--kubeconfig"))
    async with ApiClient(config) as api:
        crd = await find_crd(api, args.kind)
        stored = (crd.get("status") or {}).get("storedVersions") or []
        print(
            f"migrating {crd['metadata']['name']} to {storage_version(crd)} (stored versions: "
            f"{', '.join(stored)})",
            flush=True,
        )
        return await migrate(api, crd, report=_shown)


def migrate_command(args: argparse.Namespace) -> int:
    try:
        outcome = asyncio.run(_migrate(args))
    except (MigrationError, KubeConfigError) as error:
        print(f"ansible-operator: migrate: {error}", file=sys.stderr)
        return 1
    except ApiError as error:
        print(f"ansible-operator: migrate: {error}", file=sys.stderr)
        return 1
    resumed = f" (resumed after {outcome.resumed_after})" if outcome.resumed_after else ""
    print(
        f"done{resumed}: {outcome.migrated} objects of {outcome.crd} in "
        f"{outcome.storage_version}, {outcome.written} of them rewritten; storedVersions: "
        f"{', '.join(outcome.stored_before)} -> {', '.join(outcome.stored_after)}"
    )
    return 0
