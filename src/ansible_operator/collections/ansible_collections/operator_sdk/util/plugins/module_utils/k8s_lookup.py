"""Finding an API resource by any of its names, and describing API errors the
way the original collection's results do.

Runs on the Python of the managed host: Python 3.9 syntax and library only.
"""

from __future__ import annotations

try:
    from kubernetes.dynamic.resource import ResourceList
except ImportError:  # reported by the module with missing_required_lib
    ResourceList = ()


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
    # Naming the prefix keeps a core version ("v1") from loading every API
    # group that also has a "v1".
    prefix = "apis" if "/" in api_version else "api"
    candidates = [
        resource
        for resource in client.resources.search(prefix=prefix, api_version=api_version)
        if not isinstance(resource, ResourceList)
    ]
    for matches in _MATCHERS:
        found = [resource for resource in candidates if matches(resource, kind)]
        if len(found) == 1:
            return found[0]
    return None


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
