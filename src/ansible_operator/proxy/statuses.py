"""The proxy's own answers: Kubernetes Status bodies, as the API server gives
its errors, so clients (kubernetes.core, kubectl) show them by their message."""

from __future__ import annotations

from aiohttp import web


def status_response(code: int, reason: str, message: str) -> web.Response:
    return web.json_response(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "code": code,
            "reason": reason,
            "message": message,
        },
        status=code,
    )
