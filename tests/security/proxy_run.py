"""What the proxy attacks start from: the API proxy in-process against the
real API server, and one run's access to it (its token)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
from yarl import URL

from ansible_operator.kube.cache import InformerCache
from ansible_operator.kube.client import ApiClient
from ansible_operator.kube.config import KubeConfig
from ansible_operator.kube.discovery import RestMapper
from ansible_operator.kube.types import Owner
from ansible_operator.proxy.server import ApiProxy


@dataclass
class Run:
    """What a run has: the proxy's address and its own token; and the end of
    the run (`revoke`), as the runner calls it."""

    url: str
    token: str
    namespace: str
    revoke: Callable[[], None]

    async def send(
        self, method: str, raw_path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], Any]:
        # encoded=True: the path leaves exactly as written, as an attacker sends it.
        url = URL(self.url + raw_path, encoded=True)
        headers = {"Authorization": f"Bearer {self.token}", **(headers or {})}
        data = None if body is None else json.dumps(body)
        if data is not None:
            headers["Content-Type"] = "application/json"
        async with (
            aiohttp.ClientSession() as session,
            session.request(method, url, headers=headers, data=data) as response,
        ):
            text = await response.text()
            try:
                payload = json.loads(text)
            except ValueError:
                payload = text
            return response.status, dict(response.headers), payload


@contextlib.asynccontextmanager
async def proxy_for_a_run(
    config: KubeConfig, namespace: str, *, upstream: KubeConfig | None = None
) -> AsyncIterator[Run]:
    """A proxy caching the ConfigMaps of `namespace`, and a run owned by the
    ConfigMap "owner" there. `upstream`: where the proxy forwards to, if not
    to the API server of `config` (a stand-in in front of it)."""
    async with ApiClient(config) as api:
        mapper = RestMapper(api)
        configmaps = await mapper.resource_for("", "v1", "ConfigMap")
        cache = InformerCache(api, [namespace])
        await cache.informer(configmaps).wait_synced()
        proxy = ApiProxy(upstream or config, mapper, cache=cache, port=0)
        port = await proxy.start()
        owner_obj = await api.create(configmaps, {"metadata": {"name": "owner"}}, namespace)
        owner = Owner("", "v1", "ConfigMap", namespace, "owner", owner_obj["metadata"]["uid"])
        access = proxy.grant(owner)
        assert access.kubeconfig is not None
        try:
            yield Run(
                f"http://127.0.0.1:{port}",
                access.kubeconfig["users"][0]["user"]["token"],
                namespace,
                access.revoke,
            )
        finally:
            await proxy.stop()
            await cache.stop()
