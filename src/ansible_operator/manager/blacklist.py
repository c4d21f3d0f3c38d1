"""Which kinds a watch's runs write that never get a dependent watch (the
watches.yaml keys `watchDependentResources`, `watchClusterScopedResources` and
`blacklist`), as pure functions of the watch and the kind.

A blacklisted kind is also never read from the cache by that watch's runs, as
in the reference: its reads go to the API server.
"""

from __future__ import annotations

from ansible_operator.kube.types import Resource
from ansible_operator.project.watches import Watch


def blacklisted(watch: Watch, resource: Resource) -> bool:
    return any(
        entry.group == resource.group
        and entry.version == resource.version
        and entry.kind == resource.kind
        for entry in watch.blacklist
    )


def gets_dependent_watch(watch: Watch, resource: Resource) -> bool:
    """Whether a write of `resource` by a run of `watch` makes changes to that
    kind re-run the owner."""
    if not watch.watch_dependent_resources or blacklisted(watch, resource):
        return False
    return resource.namespaced or watch.watch_cluster_scoped_resources
