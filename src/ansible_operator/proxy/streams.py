"""Copying what flows between the API server and a run, as it comes."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
from aiohttp import web


async def copy_body(upstream: aiohttp.ClientResponse, response: web.StreamResponse) -> None:
    async for chunk in upstream.content.iter_any():
        await response.write(chunk)


async def relay_frames(source: Any, sink: Any) -> None:
    """One direction of a WebSocket tunnel, frame by frame, until either end closes."""
    async for message in source:
        if message.type == aiohttp.WSMsgType.BINARY:
            await sink.send_bytes(message.data)
        elif message.type == aiohttp.WSMsgType.TEXT:
            await sink.send_str(message.data)
        else:
            break
    await sink.close()


async def relay_tunnel(upstream: Any, downstream: Any) -> None:
    await asyncio.gather(
        relay_frames(upstream, downstream),
        relay_frames(downstream, upstream),
        return_exceptions=True,
    )
