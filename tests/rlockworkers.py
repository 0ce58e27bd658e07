"""Code that runs in child processes of the RLock tests (multiprocessing "spawn").

Each worker builds its own client from (url, cluster, world), as in lockworkers.py.
"""

from __future__ import annotations

import asyncio
import time
from multiprocessing.connection import Connection

from lockworkers import async_client, counter_key, sync_client

import seawall
import seawall.aio


def count_under_rlock(
    url: str, cluster: bool, world: str, name: str, n: int, ttl: float
) -> list[tuple[int, int]]:
    """n outermost acquisitions, each entered twice; GET then SET of a counter inside.

    Returns each hold's (enter, exit) in monotonic ns, for the overlap check.
    """
    if world == "async":
        return asyncio.run(_count_async(url, cluster, name, n, ttl))
    r = sync_client(url, cluster)
    lock = seawall.RLock(r, name, ttl=ttl, timeout=30)
    key = counter_key(name)
    ledger = []
    for _ in range(n):
        with lock:
            entered = time.monotonic_ns()
            with lock:
                value = int(r.get(key) or 0)
            r.set(key, value + 1)  # after the inner release: still held
            ledger.append((entered, time.monotonic_ns()))
    r.close()
    return ledger


async def _count_async(
    url: str, cluster: bool, name: str, n: int, ttl: float
) -> list[tuple[int, int]]:
    r = async_client(url, cluster)
    lock = seawall.aio.RLock(r, name, ttl=ttl, timeout=30)
    key = counter_key(name)
    ledger = []
    for _ in range(n):
        async with lock:
            entered = time.monotonic_ns()
            async with lock:
                value = int(await r.get(key) or 0)
            await r.set(key, value + 1)
            ledger.append((entered, time.monotonic_ns()))
    await r.aclose()
    return ledger


def reentered_holder(
    url: str, cluster: bool, world: str, name: str, ttl: float, pipe: Connection
) -> None:
    """Take the lock three times over, report ("held", fence), then hold until killed."""
    if world == "async":
        asyncio.run(_reentered_holder_async(url, cluster, name, ttl, pipe))
        return
    lock = seawall.RLock(sync_client(url, cluster), name, ttl=ttl)
    for _ in range(3):
        lock.acquire()
    pipe.send(("held", lock.fence))
    time.sleep(600)


async def _reentered_holder_async(
    url: str, cluster: bool, name: str, ttl: float, pipe: Connection
) -> None:
    lock = seawall.aio.RLock(async_client(url, cluster), name, ttl=ttl)
    for _ in range(3):
        await lock.acquire()
    pipe.send(("held", lock.fence))
    await asyncio.sleep(600)
