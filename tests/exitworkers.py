"""A process that opens and leaves many event loops, for tests/test_asyncio_exit.py."""

from __future__ import annotations

import asyncio
import random
import time

from lockworkers import async_client

from seawall.cache._async import waker as cache_waker
from seawall.cache._async.waker import get_cache_waker

# A listener that went on after its loop's end would keep asyncio.run() from returning
# for its idle period at least: long here, so that such a hang stands far apart from a
# machine that stalls for seconds (tests/test_asyncio_exit.py).
IDLE_EXIT = 300.0


async def _touch_listeners(url: str, cluster: bool, delay: float) -> None:
    r = async_client(url, cluster)
    if cluster:
        await r.initialize()
    waker = get_cache_waker(r)  # what a caller waiting on another process's load starts
    assert await waker.start(10)
    waker.watch("k")
    await asyncio.sleep(delay)
    await r.aclose()


def slowest_exit(url: str, cluster: bool, rounds: int) -> float:
    """Run `rounds` event loops that leave listeners running; the slowest one's seconds."""
    cache_waker.IDLE_EXIT = IDLE_EXIT
    worst = 0.0
    for _ in range(rounds):
        started = time.monotonic()
        asyncio.run(_touch_listeners(url, cluster, random.uniform(0.0, 0.3)))
        worst = max(worst, time.monotonic() - started)
    return worst
