"""A small asyncio client for the Kubernetes REST API, on aiohttp.

Everything the operator says to the API server goes through one `ApiClient`
(one connection pool, one event loop). Objects stay plain dicts: the
operator passes them to Ansible as JSON, so typed models would only be
converted back. A changed kubeconfig is followed (kube/upstreams.py), and
whether the server answers is kept for the health probes (kube/reachability.py).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Mapping
from types import TracebackType
from typing import Any

import aiohttp

from ansible_operator import __version__
from ansible_operator.kube.api import PatchType
from ansible_operator.kube.config import KubeConfig
from ansible_operator.kube.reachability import Reachability
from ansible_operator.kube.types import Resource
from ansible_operator.kube.upstreams import Upstreams

log = logging.getLogger("ansible_operator.kube")

PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "apply": "application/apply-patch+yaml",
}
FIELD_MANAGER = "ansible-operator"
LIST_PAGE_SIZE = 500


class ApiError(Exception):
    """The API server said no (or could not be reached: status 503)."""

    def __init__(
        self, status: int, reason: str, message: str, body: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = dict(body) if body is not None else None


def _error_from(status: int, text: str) -> ApiError:
    try:
        body = json.loads(text)
    except ValueError:
        return ApiError(status, "Error", text.strip()[:500] or f"HTTP {status}")
    if not isinstance(body, dict):
        return ApiError(status, "Error", text.strip()[:500])
    return ApiError(
        status, body.get("reason") or "Error", body.get("message") or text.strip()[:500], body
    )


class ApiClient:
    def __init__(
        self,
        config: KubeConfig,
        *,
        timeout: float = 60.0,
        trace_configs: list[aiohttp.TraceConfig] | None = None,
    ) -> None:
        self.config = config
        self.timeout = timeout
        self.trace_configs = trace_configs  # e.g. counting requests (metrics)
        self.reachability = Reachability()
        self._upstreams: Upstreams | None = None

    async def __aenter__(self) -> ApiClient:
        self.open()
        return self

    async def __aexit__(
        self,
        _type: type[BaseException] | None,
        _value: BaseException | None,
        _traceback: TracebackType | None,
    ) -> None:
        await self.close()

    def open(self) -> None:
        if self._upstreams is None:
            self._upstreams = Upstreams(self.config, self._new_session)

    def _new_session(self, config: KubeConfig) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(
            base_url=config.server.rstrip("/") + "/",
            # No pool limit: every watch holds a connection for its life, and with
            # a limit the watches of many kinds and namespaces took the whole pool
            # while status writes and probes queued behind them (bench/scale.py:
            # 400 watches, 100 connections, no run for minutes). Requests are
            # bounded by the workers and runs that make them.
            connector=aiohttp.TCPConnector(ssl=config.ssl, limit=0),
            headers={"User-Agent": f"ansible-operator/{__version__}"},
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
            trace_configs=self.trace_configs,
        )

    async def close(self) -> None:
        if self._upstreams is not None:
            await self._upstreams.close()
            self._upstreams = None

    @property
    def upstreams(self) -> Upstreams:
        if self._upstreams is None:
            raise RuntimeError("ApiClient is not open; use `async with ApiClient(config)`")
        return self._upstreams

    @property
    def session(self) -> aiohttp.ClientSession:
        return self.upstreams.latest.session

    async def current_generation(self) -> int:
        """The generation of the kubeconfig in use, after reading it again if it
        changed: what an informer listed under another one may be another cluster."""
        return (await self.upstreams.current()).generation

    async def pause(self, seconds: float) -> None:
        """Sleep before a retry, ending early when the kubeconfig changes: the
        failure may have been the old server's."""
        await self.upstreams.wait_switched(seconds)

    # ----- raw ----------------------------------------------------------------
    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Any:
        data = json.dumps(body) if body is not None else None
        for attempt in range(2):
            async with self.upstreams.use() as upstream:
                headers = await self.config.auth_headers()
                headers["Accept"] = "application/json"
                if data is not None:
                    headers["Content-Type"] = content_type
                try:
                    async with upstream.session.request(
                        method,
                        path.lstrip("/"),
                        params=params,
                        data=data,
                        headers=headers,
                        timeout=aiohttp.ClientTimeout(total=self.timeout),
                    ) as response:
                        status, text = response.status, await response.text()
                except (aiohttp.ClientError, TimeoutError) as error:
                    reason = f"{error or type(error).__name__}"
                    self.reachability.failed(upstream.server, reason)
                    raise ApiError(
                        503,
                        "ServiceUnavailable",
                        f"{method} {path}: API server unreachable at {upstream.server}: {reason}",
                    ) from error
            self.reachability.answered()
            # 401: our credential expired or was revoked; as client-go, renew it
            # once (re-run the exec plugin, re-read the token file) and retry.
            if status == 401 and attempt == 0 and await self.config.refresh_credentials(headers):
                continue
            if status >= 400:
                raise _error_from(status, text)
            break
        return json.loads(text) if text else {}

    # ----- verbs --------------------------------------------------------------
    async def get(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        return await self.request("GET", resource.path(namespace, name, subresource))

    async def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        shard_selector: str | None = None,
    ) -> dict[str, Any]:
        """Every page; the result carries the last page's resourceVersion (and,
        when the server applied `shard_selector`, its `shardInfo`)."""
        params: dict[str, str] = {"limit": str(LIST_PAGE_SIZE)}
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        if shard_selector:
            params["shardSelector"] = shard_selector
        items: list[dict[str, Any]] = []
        while True:
            page = await self.request("GET", resource.path(namespace), params=params)
            items.extend(page.get("items") or [])
            continue_token = (page.get("metadata") or {}).get("continue")
            if not continue_token:
                page["items"] = items
                return page
            params["continue"] = continue_token

    async def create(
        self, resource: Resource, body: Mapping[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        if namespace is None and resource.namespaced:
            namespace = (body.get("metadata") or {}).get("namespace")
        return await self.request(
            "POST",
            resource.path(namespace),
            body=self._typed(resource, body),
            params={"fieldManager": FIELD_MANAGER},
        )

    async def replace(
        self,
        resource: Resource,
        name: str,
        body: Mapping[str, Any],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        return await self.request(
            "PUT",
            resource.path(namespace, name, subresource),
            body=self._typed(resource, body),
            params={"fieldManager": FIELD_MANAGER},
        )

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        patch_type: PatchType = "merge",
        field_manager: str = FIELD_MANAGER,
        force: bool = False,
    ) -> dict[str, Any]:
        params = {"fieldManager": field_manager}
        if patch_type == "apply":
            patch = self._typed(resource, patch)
            if force:
                params["force"] = "true"
        return await self.request(
            "PATCH",
            resource.path(namespace, name, subresource),
            body=patch,
            content_type=PATCH_CONTENT_TYPES[patch_type],
            params=params,
        )

    async def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        propagation_policy: str | None = None,
    ) -> dict[str, Any]:
        body = {"propagationPolicy": propagation_policy} if propagation_policy else None
        return await self.request("DELETE", resource.path(namespace, name), body=body)

    async def watch(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        shard_selector: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[dict[str, Any]]:
        """Watch events (with bookmarks) until the server ends the watch.

        Raises ApiError for an HTTP error and for an ERROR event (410 Gone
        included), so the caller relists.
        """
        params = {
            "watch": "1",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
        }
        if resource_version:
            params["resourceVersion"] = resource_version
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        if shard_selector:
            params["shardSelector"] = shard_selector
        for attempt in range(2):
            headers = await self.config.auth_headers()
            headers["Accept"] = "application/json"
            # Not held as a user of the session: a kubeconfig change closes it
            # under this watch, and the informer relists from the new server.
            # (Taken last: nothing awaited between here and the request.)
            upstream = await self.upstreams.current()
            try:
                async with upstream.session.get(
                    resource.path(namespace).lstrip("/"),
                    params=params,
                    headers=headers,
                    timeout=aiohttp.ClientTimeout(
                        total=None, sock_connect=10, sock_read=timeout_seconds + 30
                    ),
                ) as response:
                    self.reachability.answered()
                    if (
                        response.status == 401
                        and attempt == 0
                        and await self.config.refresh_credentials(headers)
                    ):
                        continue  # renewed credentials: see `request`
                    if response.status >= 400:
                        raise _error_from(response.status, await response.text())
                    # Lines can be far larger than aiohttp's readline limit (big objects).
                    buffer = b""
                    async for chunk in response.content.iter_any():
                        buffer += chunk
                        while b"\n" in buffer:
                            line, buffer = buffer.split(b"\n", 1)
                            if line.strip():
                                yield self._event(json.loads(line))
                    if buffer.strip():
                        yield self._event(json.loads(buffer))
                    return
            except (aiohttp.ClientError, TimeoutError) as error:
                reason = f"{error or type(error).__name__}"
                if not upstream.retired:  # our own switch ended it: not the server's failure
                    self.reachability.failed(upstream.server, reason)
                raise ApiError(
                    503, "ServiceUnavailable", f"watch {resource.plural}: {reason}"
                ) from error

    @staticmethod
    def _event(event: dict[str, Any]) -> dict[str, Any]:
        if event.get("type") == "ERROR":
            status = event.get("object") or {}
            raise ApiError(
                int(status.get("code") or 500),
                status.get("reason") or "Error",
                status.get("message") or "watch error",
                status,
            )
        return event

    @staticmethod
    def _typed(resource: Resource, body: Mapping[str, Any]) -> dict[str, Any]:
        typed = dict(body)
        typed.setdefault("apiVersion", resource.api_version)
        typed.setdefault("kind", resource.kind)
        return typed
