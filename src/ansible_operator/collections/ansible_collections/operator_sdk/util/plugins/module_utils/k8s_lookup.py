"""Finding an API resource by any of its names, and describing API errors the
way the original collection's results do.

Runs on the Python of the managed host: Python 3.9 syntax and library only.
"""

from __future__ import annotations

try:
    from kubernetes.dynamic.exceptions import NotFoundError, ServiceUnavailableError
    from kubernetes.dynamic.resource import ResourceList
except ImportError:  # reported by the module with missing_required_lib
    ResourceList = NotFoundError = ServiceUnavailableError = ()


def _by_kind(resource, kind):
    return resource.kind == kind


def _by_plural(resource, kind):
    return getattr(resource, "name", None) == kind


def _by_singular(resource, kind):
    return getattr(resource, "singular_name", None) == kind


def _by_short_name(resource, kind):
    return kind in (getattr(resource, "short_names", None) or [])


# The original's order: the Kind, then the plural, the singular, a short name.
_MATCHERS = (_by_kind, _by_plural, _by_singular, _by_short_name)


def find_resource(client, kind, api_version):
    """The resource of ``api_version`` that ``kind`` names, or None when none
    or more than one does at every step."""
    candidates = [
        resource
        for kinds in _group_version(client, api_version).values()
        for resource in kinds
        if not isinstance(resource, ResourceList)
    ]
    for matches in _MATCHERS:
        found = [resource for resource in candidates if matches(resource, kind)]
        if len(found) == 1:
            return found[0]
    return None


def _group_version(client, api_version):
    """The resources of ``api_version`` by kind, from one request for its
    group version; none when the server does not serve it (or, an aggregated
    API, cannot now), as the library's discovery finds none."""
    group, _, version = api_version.rpartition("/")
    prefix = "apis" if group else "api"
    try:
        return client.resources.get_resources_for_api_version(prefix, group, version, True)
    except (NotFoundError, ServiceUnavailableError):
        return {}


def error_details(error):
    """``{status, reason, body}`` of an API error, as the original's ``error``."""
    body = error.body
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    return {"status": error.status, "reason": error.reason, "body": body}


def error_summary(error):
    """The API server's message for an error, else its status line."""
    try:
        return error.summary()
    except Exception:
        return f"{error.status} {error.reason}"
