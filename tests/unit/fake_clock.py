"""Time passing on the event loop's fake clock (looptime, `pytest.mark.looptime`):
`await elapse(3600)` moves the loop's time an hour on at once, firing every timer due
meanwhile in order. Outside a looptime test it would really wait, so it refuses to."""

from __future__ import annotations

import asyncio


async def elapse(seconds: float) -> None:
    loop = asyncio.get_running_loop()
    if not getattr(loop, "looptime_on", False):
        raise RuntimeError("elapse() needs the fake clock: mark the test pytest.mark.looptime")
    await asyncio.sleep(seconds)
