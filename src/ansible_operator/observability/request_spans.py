"""An API request a run sent through the proxy -> its span (pure).

    proxy <verb> <resource>    verb as RBAC names it (get, list, watch, create,
                               update, patch, delete, deletecollection), resource
                               as `group/plural` (`plural` for the core group)

Only what the request addresses and how it was answered: never its body, its
query or its headers. The path's names pass through the run's redactor, as
any text of the run's spans does (a name may have been templated from a value
the run must not let out).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ansible_operator.observability.spans import Attributes, SpanRecord


@dataclass(frozen=True)
class ApiRequest:
    method: str  # the HTTP method as sent
    path: str  # decoded, without the query
    group: str | None  # None: not a resource path (discovery, /version)
    plural: str
    subresource: str
    namespace: str
    name: str
    watch: bool  # ?watch=true
    status: int  # the answer's status code; 0: the proxy failed before answering
    start_ns: int
    end_ns: int
    cached: bool = False  # answered from the operator's cache (X-Cache: HIT)


def verb(request: ApiRequest) -> str:
    """The request's verb as RBAC names it; the HTTP method in lower case for
    paths that are no resource's."""
    method = request.method.upper()
    if request.group is None:
        return method.lower()
    if method == "GET":
        if request.watch:
            return "watch"
        return "get" if request.name else "list"
    if method == "DELETE":
        return "delete" if request.name else "deletecollection"
    return {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, method.lower())


def resource(request: ApiRequest) -> str:
    if request.group is None:
        return ""
    return f"{request.group}/{request.plural}" if request.group else request.plural


def request_record(request: ApiRequest, redact: Callable[[str], str]) -> SpanRecord:
    the_verb, the_resource = verb(request), resource(request)
    attributes: Attributes = {
        "http.request.method": request.method.upper(),
        "url.path": redact(request.path),
        "k8s.request.verb": the_verb,
    }
    if request.status:
        attributes["http.response.status_code"] = request.status
    if the_resource:
        attributes["k8s.request.resource"] = the_resource
    if request.subresource:
        attributes["k8s.request.subresource"] = request.subresource
    if request.namespace:
        attributes["k8s.namespace.name"] = redact(request.namespace)
    if request.name:
        attributes["k8s.object.name"] = redact(request.name)
    if request.cached:
        attributes["ansible_operator.proxy.cached"] = True
    subject = the_resource + (f"/{request.subresource}" if request.subresource else "")
    error = None
    if not request.status:
        error = "the proxy failed before answering"
    elif request.status >= 500:  # a server's span fails on 5xx (4xx is the client's)
        error = f"HTTP {request.status}"
    return SpanRecord(
        name=f"proxy {the_verb} {subject or redact(request.path)}",
        start_ns=request.start_ns,
        end_ns=request.end_ns,
        attributes=attributes,
        error=error,
        kind="server",
    )
