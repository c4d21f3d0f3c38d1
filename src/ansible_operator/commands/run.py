"""`ansible-operator run`: the reference's flags, names and defaults.

The flags are generated from the settings' declarations (ansible_operator/settings/);
Go-style values are accepted as the reference's users write them:
`--leader-elect`, `--leader-elect=true`, `--inject-owner-ref=false`,
`--reconcile-period=1m30s`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path

from ansible_operator import __version__
from ansible_operator.observability import logs
from ansible_operator.runner.versions import installed_versions, one_line
from ansible_operator.runner.warm.accelerations import acceleration_names
from ansible_operator.settings import Settings
from ansible_operator.settings.flags import add_flags, flag_value, settings_from

log = logging.getLogger("ansible_operator")


def accelerations_known(value: str) -> list[str]:
    try:
        return acceleration_names(value)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from error


# The declared parsers `run` replaces: these checks need the runner, which the
# settings may not import.
COMMAND_PARSERS = {"--disable-acceleration": accelerations_known}


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Every flag, generated from the settings' declarations (ansible_operator/settings/)."""
    add_flags(parser, parsers=COMMAND_PARSERS)


def add_acceleration_switch(parser: argparse.ArgumentParser) -> None:
    add_flags(parser, only=["--disable-acceleration"], parsers=COMMAND_PARSERS)


def switched_off(args: argparse.Namespace) -> tuple[str, ...]:
    names: tuple[str, ...] = flag_value(args, "--disable-acceleration")
    return names


def settings_of(args: argparse.Namespace) -> Settings:
    return settings_from(args, os.environ)


def run(args: argparse.Namespace) -> int:
    from ansible_operator.cluster import connect_config
    from ansible_operator.kube.config import KubeConfigError
    from ansible_operator.manager.manager import Manager
    from ansible_operator.project.watches import (
        WatchesError,
        load_watches_file,
        templated_cluster_data,
    )
    from ansible_operator.runner.warm.zygote import WarmZygote
    from ansible_operator.serving.http_limits import raise_open_file_limit

    settings = settings_of(args)
    if settings.watching.namespace_selector and settings.watching.namespaces:
        print(
            "ansible-operator: WATCH_NAMESPACE and --watch-namespace-selector "
            "(WATCH_NAMESPACE_SELECTOR) both choose the watched namespaces: set one",
            file=sys.stderr,
        )
        return 2
    if settings.leader_election.shard_ring and settings.leader_election.enabled:
        print(
            "ansible-operator: --shard-ring (SHARD_RING) and --leader-elect both choose which "
            "replicas reconcile: a ring shares the objects among every replica, leader "
            "election gives them all to one; set one",
            file=sys.stderr,
        )
        return 2
    level = logs.parse_level("debug" if settings.log.devel else settings.log.level)
    logs.configure(level, settings.log.encoder)
    log.info("ansible-operator %s %s", __version__, one_line(installed_versions()))
    before, after = raise_open_file_limit()
    if after != before:
        log.info("open file limit raised soft=%d was=%d", after, before)
    env = dict(os.environ)
    if settings.ansible.roles_path:
        env["ANSIBLE_ROLES_PATH"] = settings.ansible.roles_path
    if settings.ansible.collections_path:
        env["ANSIBLE_COLLECTIONS_PATH"] = settings.ansible.collections_path
    watches_file = settings.watching.watches_file
    try:
        declared = load_watches_file(watches_file, env=env, cwd=Path.cwd())
    except WatchesError as error:
        print(f"ansible-operator: invalid watches file:\n{error}", file=sys.stderr)
        return 2
    except FileNotFoundError:
        print(f"ansible-operator: watches file not found: {watches_file}", file=sys.stderr)
        return 2
    for warning in templated_cluster_data(declared.watches):
        log.warning("%s", warning)
    # Now, with the operator's code imported and before any thread: the
    # warm runner shares what both import (zygote.py).
    zygote = WarmZygote.fork() if settings.runs.runner_mode == "warm" else None
    manager = Manager(
        declared.watches,
        settings,
        connect=connect_config,
        webhooks=declared.webhooks,
        conversions=declared.conversions,
        zygote=zygote,
    )
    try:
        return asyncio.run(manager.run())
    except KubeConfigError as error:
        print(f"ansible-operator: {error}", file=sys.stderr)
        return 2
    finally:
        if zygote is not None:
            zygote.discard()
