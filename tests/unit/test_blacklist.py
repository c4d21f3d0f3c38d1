"""Which kinds a watch's runs write get a dependent watch, and which are read
from the server rather than the cache."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ansible_operator.kube.types import GVK, Resource
from ansible_operator.manager.blacklist import blacklisted, gets_dependent_watch
from ansible_operator.project.watches import Watch

DEPLOYMENTS = Resource("apps", "v1", "Deployment", "deployments", True)
SECRETS = Resource("", "v1", "Secret", "secrets", True)
CLUSTER_ROLES = Resource("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", False)


def watch(**settings: Any) -> Watch:
    return Watch(
        gvk=GVK("cache.example.com", "v1alpha1", "Memcached"),
        role=Path("roles/memcached"),
        playbook=None,
        vars={},
        **settings,
    )


@pytest.mark.parametrize(
    ("settings", "resource", "expected"),
    [
        pytest.param({}, DEPLOYMENTS, True, id="a namespaced kind, by default"),
        pytest.param(
            {"watch_dependent_resources": False},
            DEPLOYMENTS,
            False,
            id="watchDependentResources: false",
        ),
        pytest.param({}, CLUSTER_ROLES, False, id="a cluster-scoped kind, by default"),
        pytest.param(
            {"watch_cluster_scoped_resources": True},
            CLUSTER_ROLES,
            True,
            id="a cluster-scoped kind with watchClusterScopedResources",
        ),
        pytest.param({"blacklist": (GVK("", "v1", "Secret"),)}, SECRETS, False, id="blacklisted"),
        pytest.param(
            {"blacklist": (GVK("", "v1", "Secret"),)},
            DEPLOYMENTS,
            True,
            id="another kind than the blacklisted one",
        ),
        pytest.param(
            {"blacklist": (GVK("apps", "v1beta1", "Deployment"),)},
            DEPLOYMENTS,
            True,
            id="the blacklist names a version exactly",
        ),
        pytest.param(
            {
                "watch_cluster_scoped_resources": True,
                "blacklist": (GVK("rbac.authorization.k8s.io", "v1", "ClusterRole"),),
            },
            CLUSTER_ROLES,
            False,
            id="the blacklist wins over watchClusterScopedResources",
        ),
    ],
)
def test_which_written_kinds_get_a_dependent_watch(
    settings: dict[str, Any], resource: Resource, expected: bool
) -> None:
    assert gets_dependent_watch(watch(**settings), resource) is expected


def test_a_blacklisted_kind_stays_blacklisted_without_dependent_watches() -> None:
    # Reads of a blacklisted kind go to the server even when the watch follows
    # no dependents at all: the blacklist alone decides that.
    settings = watch(watch_dependent_resources=False, blacklist=(GVK("", "v1", "Secret"),))
    assert blacklisted(settings, SECRETS)
    assert not blacklisted(settings, DEPLOYMENTS)
