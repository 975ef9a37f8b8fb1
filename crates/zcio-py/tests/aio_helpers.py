"""What the asyncio test files share: a bounded await and a loop ticker."""

from __future__ import annotations

import asyncio

import zcio_children as kids


async def bounded(aw, seconds: float = kids.TIMEOUT):
    """`aw`, failing the test (TimeoutError) instead of hanging."""
    return await asyncio.wait_for(aw, seconds)


class Ticker:
    """A task that counts 1 ms sleeps: it advances only while the loop is
    free."""

    def __init__(self) -> None:
        self.ticks = 0
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(0.001)
            self.ticks += 1

    def stop(self) -> None:
        self.task.cancel()
