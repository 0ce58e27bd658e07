"""Code that runs in child processes of the RWLock tests (forked by forked.FORKSERVER).

Ledgers are (kind, enter, exit, counter) with time.monotonic_ns(), one clock for all
processes on Linux, so intervals from different processes can be compared.
"""

from __future__ import annotations

import asyncio
import time
from multiprocessing.connection import Connection
from typing import Any

from lockworkers import async_client, counter_key, sync_client

import seawall
import seawall.aio

READ_HOLD = 0.001  # long enough for readers of different processes to overlap


def rw_ops(
    url: str, cluster: bool, world: str, name: str, kind: str, n: int, ttl: float
) -> list[tuple[str, int, int, int]]:
    """n holds of one side. A writer increments the counter (GET then SET) and records the
    value it wrote; a reader records the value it read."""
    if world == "async":
        return asyncio.run(_rw_ops_async(url, cluster, name, kind, n, ttl))
    r = sync_client(url, cluster)
    rw = seawall.RWLock(r, name, ttl=ttl, timeout=60)
    key = counter_key(name)
    ledger = []
    for _ in range(n):
        side = rw.write() if kind == "write" else rw.read()
        with side:
            entered = time.monotonic_ns()
            value = int(r.get(key) or 0)
            if kind == "write":
                value += 1
                r.set(key, value)
            else:
                time.sleep(READ_HOLD)
            ledger.append((kind, entered, time.monotonic_ns(), value))
    r.close()
    return ledger


async def _rw_ops_async(
    url: str, cluster: bool, name: str, kind: str, n: int, ttl: float
) -> list[tuple[str, int, int, int]]:
    r = async_client(url, cluster)
    rw = seawall.aio.RWLock(r, name, ttl=ttl, timeout=60)
    key = counter_key(name)
    ledger = []
    for _ in range(n):
        side = rw.write() if kind == "write" else rw.read()
        async with side:
            entered = time.monotonic_ns()
            value = int(await r.get(key) or 0)
            if kind == "write":
                value += 1
                await r.set(key, value)
            else:
                await asyncio.sleep(READ_HOLD)
            ledger.append((kind, entered, time.monotonic_ns(), value))
    await r.aclose()
    return ledger


def hold_side(
    url: str, name: str, kind: str, ttl: float, pipe: Connection, cluster: bool = False
) -> None:
    """Acquire one side (blocking), report ("held", fence), then hold until killed."""
    r = sync_client(url, cluster)
    rw = seawall.RWLock(r, name, ttl=ttl)
    side: Any = rw.write() if kind == "write" else rw.read()
    pipe.send(("waiting",))
    side.acquire()
    pipe.send(("held", side.fence))
    time.sleep(120)
