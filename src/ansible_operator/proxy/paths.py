"""Kubernetes API URL paths -> what they address.

The proxy decides what a request touches (which kind, namespace and name: its
ownership marking, its cache) from the path, then forwards the path as sent.
Both ends must read the path the same way, so a path that two decoders could
read differently is refused: a dot segment (`..`, also as `%2e%2e`), an
encoded slash or backslash (`%2f`, `%5c`), either hidden under more layers of
encoding (`%252f`), a backslash, an empty segment. No Kubernetes name can
contain any of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

from ansible_operator.kube.types import api_version

ENCODING_LAYERS = 4  # more layers of %-encoding than any client writes: refused


@dataclass(frozen=True)
class ResourcePath:
    group: str
    version: str
    plural: str
    namespace: str | None  # None: cluster-scoped, or a list across all namespaces
    name: str | None
    subresource: str | None

    @property
    def api_version(self) -> str:
        return api_version(self.group, self.version)


def parse_resource_path(path: str) -> ResourcePath | None:
    """/api/v1/namespaces/ns/configmaps/x, /apis/apps/v1/deployments, ... or None
    for anything that is not a resource (discovery, /version, /openapi, ...).

    `/api/v1/namespaces/x` is the Namespace named x, not a namespace scope.
    """
    parts = [part for part in path.split("/") if part]
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    if not rest:
        return None
    namespace: str | None = None
    namespace_subresource = len(rest) == 3 and rest[2] in ("status", "finalize")
    if rest[0] == "namespaces" and len(rest) >= 3 and not namespace_subresource:
        namespace, rest = rest[1], rest[2:]
    plural = rest[0]
    name = rest[1] if len(rest) >= 2 else None
    subresource = "/".join(rest[2:]) if len(rest) >= 3 else None
    if plural == "watch":  # the deprecated /watch/ prefix: not served from cache
        return None
    return ResourcePath(group, version, plural, namespace, name, subresource)


class UnsafePathError(ValueError):
    """A path the proxy and the API server might read as different resources."""


def decoded_path(raw_path: str) -> str:
    """The path of a request as sent (`raw_path`, without the query) decoded
    once, segment by segment, as the API server decodes it; `UnsafePathError`
    naming the problem if another reading of it could address something else."""
    segments = raw_path.split("/")
    if segments[0] != "":
        raise UnsafePathError("the path must start with '/'")
    decoded = [""]
    last = len(segments) - 1
    for index, segment in enumerate(segments[1:], start=1):
        if segment == "" and index != last:  # a trailing '/' is fine, '//' is not
            raise UnsafePathError("an empty path segment ('//')")
        decoded.append(_checked_segment(segment))
    return "/".join(decoded)


def _checked_segment(raw: str) -> str:
    """`raw` decoded once, after a look through every layer of its encoding."""
    if "\\" in raw:
        raise UnsafePathError(f"a backslash in path segment {raw!r}")
    text = raw
    for layer in range(ENCODING_LAYERS + 1):
        if text in (".", ".."):
            how = " (percent-encoded)" if layer else ""
            raise UnsafePathError(f"a dot segment {raw!r}{how}")
        if layer and "/" in text:
            raise UnsafePathError(f"an encoded slash in path segment {raw!r}")
        if layer and "\\" in text:
            raise UnsafePathError(f"an encoded backslash in path segment {raw!r}")
        decoded = unquote(text)
        if decoded == text:
            return unquote(raw)
        text = decoded
    raise UnsafePathError(f"more than {ENCODING_LAYERS} layers of %-encoding in {raw!r}")
