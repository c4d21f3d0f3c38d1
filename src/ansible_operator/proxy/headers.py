"""Which headers cross the proxy, in each direction, and the URL a request
goes to on the API server."""

from __future__ import annotations

from aiohttp import web
from yarl import URL

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
        "authorization",
        "content-length",
    }
)
# Not forwarded either: aiohttp hands us the request's body decoded.
NOT_FORWARDED = HOP_BY_HOP | {"content-encoding"}
# Headers that make the API server take a request for another user's:
# impersonation, and request-header authentication (--requestheader-username-headers
# and friends: X-Remote-User, X-Remote-Group, X-Remote-Uid, X-Remote-Extra-*).
IDENTITY_HEADER_PREFIXES = ("impersonate-", "x-remote-")


def names_an_identity(header: str) -> bool:
    return header.lower().startswith(IDENTITY_HEADER_PREFIXES)


def forwarded_headers(request: web.Request) -> dict[str, str]:
    """The run's request headers the API server gets (with our credentials added)."""
    return {
        key: value
        for key, value in request.headers.items()
        if key.lower() not in NOT_FORWARDED and not names_an_identity(key)
    }


def upstream_url(request: web.Request, server: str) -> URL:
    """The API server's URL with the path and query exactly as the run sent
    them: decoded and encoded again, `%2F` or `%26` would mean another thing."""
    return URL(server.rstrip("/") + request.rel_url.raw_path_qs, encoded=True)


APPLY_PATCH = "application/apply-patch+yaml"
MERGE_PATCHES = ("application/merge-patch+json", "application/strategic-merge-patch+json")


def content_type(request: web.Request) -> str:
    """The request's media type, without parameters (`; charset=...`)."""
    return request.headers.get("Content-Type", "").split(";")[0].strip()
