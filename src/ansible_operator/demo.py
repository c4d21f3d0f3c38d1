"""`ansible-operator demo`: the README's first command.

Today it brings up the local control plane (or uses the cluster in
KUBECONFIG) and shows it serving: version, namespaces, and a garbage-collected
dependent. Later it runs the sample operators on it.
"""

from __future__ import annotations

import argparse
import sys
import time

from kubernetes import client, config

from ansible_operator.cluster import LocalControlPlane, default_state_dir, provide


def _show(api: client.ApiClient) -> None:
    version = client.VersionApi(api).get_code()
    print(f"kube-apiserver {version.git_version} is ready")
    names = [ns.metadata.name for ns in client.CoreV1Api(api).list_namespace().items]
    print(f"namespaces: {', '.join(names)}")


def run_demo(args: argparse.Namespace) -> int:
    if args.keep:
        plane = LocalControlPlane(default_state_dir(), None)
        if not (plane.state and plane.ready()):
            from ansible_operator.cluster import local_binaries

            plane = LocalControlPlane(default_state_dir(), local_binaries())
            plane.start(detached=True, progress=lambda m: print(m, file=sys.stderr))
        with config.new_client_from_config(str(plane.kubeconfig)) as api:
            _show(api)
        print(f"export KUBECONFIG={plane.kubeconfig}   # 'ansible-operator cluster down' stops it")
        return 0
    started = time.monotonic()
    with provide(progress=lambda m: print(m, file=sys.stderr)) as cluster:
        print(
            f"cluster ({cluster.source}) ready in {time.monotonic() - started:.1f}s; "
            f"kubeconfig {cluster.kubeconfig}"
        )
        with config.new_client_from_config(str(cluster.kubeconfig)) as api:
            _show(api)
    return 0
