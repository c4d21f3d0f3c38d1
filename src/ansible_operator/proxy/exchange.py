"""What flows through the proxy's rules (pipeline.py): one `Exchange` per
request, which each rule reads and adds to, and the `Services` they share.

A rule is `async rule(exchange, pass_on) -> response`: it answers itself (a
refusal, a cached read) or returns what `pass_on(exchange)` answers, the rest
of the pipeline, perhaps after changing the exchange (the body it marks) or
acting on the answer (what a write returned).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import web

from ansible_operator.kube.config import KubeConfig
from ansible_operator.kube.discovery import RestMapper
from ansible_operator.kube.types import Owner, Resource
from ansible_operator.kube.upstreams import Upstreams
from ansible_operator.proxy.cache_view import CachedKind, ObjectCache
from ansible_operator.proxy.grants import Grant, Grants
from ansible_operator.proxy.paths import ResourcePath
from ansible_operator.proxy.writes import DependentRegistry


@dataclass
class Services:
    """What the rules share for the proxy's lifetime."""

    config: KubeConfig  # the operator's credentials, which forwarded requests carry
    upstreams: Upstreams  # sessions to the API server
    mapper: RestMapper
    grants: Grants
    cache: ObjectCache | None
    dependents: DependentRegistry | None
    inject_owner_ref: bool
    stats: dict[str, int]
    shard_labels: bool = False  # what runs mark gets its owner's shard label
    # Numbers and booleans in string-only fields sent as strings (rules/string_fields.py).
    coerce_strings: bool = True
    on_cache_hit: Callable[[], None] | None = None
    # (owner uid, object uid) already logged as a write left unowned
    unowned_said: set[tuple[str, str]] = field(default_factory=set)

    def cached_kind(
        self, resource: Resource, namespace: str | None, owner: Owner
    ) -> CachedKind | None:
        """The cache of `resource` a run of `owner` may read (and note its writes in)."""
        if self.cache is None:
            return None
        if self.dependents is not None and not self.dependents.reads_cached(resource, owner):
            return None
        return self.cache.view(resource, namespace)


@dataclass
class Exchange:
    """One request of a run, and what the rules have learned of it so far."""

    request: web.Request
    services: Services
    grant: Grant | None = None  # authenticate
    path: str = ""  # check_path: decoded once, as the API server reads it
    target: ResourcePath | None = None  # check_path: None outside the resource paths
    resource: Resource | None = None  # discover_kind: None if the server serves no such kind
    body: bytes = b""  # read_body, then perhaps marked (mark_ownership)
    answer_body: bytes | None = None  # forward: the API server's answer, when buffered

    @property
    def run(self) -> Grant:
        assert self.grant is not None, "authenticate is the first rule"
        return self.grant

    @property
    def owner(self) -> Owner:
        return self.run.owner

    @property
    def method(self) -> str:
        return self.request.method

    @property
    def namespace(self) -> str | None:
        """The namespace the path addresses, if the kind is namespaced."""
        if self.target is None or self.resource is None or not self.resource.namespaced:
            return None
        return self.target.namespace


Handler = Callable[[Exchange], Awaitable[web.StreamResponse]]
Rule = Callable[[Exchange, Handler], Awaitable[web.StreamResponse]]
