"""200 concurrent requesters in one process on a pool of 100 connections.

redis-py's ConnectionPool (sync and asyncio) raises MaxConnectionsError ("Too many
connections") when a command finds all of them busy. seawall.Cache holds its commands to
the pool's size (less its pub/sub connections) and waits for a free one instead; the same
load written as plain GET/SET fails a large share of its requests (the control). Each run
begins with the server paused for a moment (CLIENT PAUSE), so all 200 first requests are
in flight at once whatever the machine's load: left to the scheduler, a loaded machine
once ran the control without ever having 100 commands in flight, and it proved nothing.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from typing import Any

import pytest
import redis
import redis.asyncio
from conftest import Target

import seawall
import seawall.aio

REQUESTERS = 200
PER_REQUESTER = 20
KEYS = 2_000
POOL = 100
# The server is paused this long as the requesters start (see the docstring).
PAUSE_MS = 200


def keys_for(index: int) -> list[str]:
    rng = random.Random(index)
    return [f"k{rng.randrange(KEYS)}" for _ in range(PER_REQUESTER)]


def in_threads(work: Any, admin: Any) -> list[str]:
    errors: list[str] = []
    # The pause is in effect before any requester is let go.
    start = threading.Barrier(REQUESTERS, action=lambda: admin.client_pause(PAUSE_MS))

    def requester(index: int) -> None:
        start.wait()
        for key in keys_for(index):
            try:
                work(key)
            except Exception as exc:
                errors.append(repr(exc))

    threads = [threading.Thread(target=requester, args=(i,)) for i in range(REQUESTERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return errors


async def in_tasks(work: Any, admin: Any) -> list[str]:
    errors: list[str] = []

    async def requester(index: int) -> None:
        for key in keys_for(index):
            try:
                await work(key)
            except Exception as exc:
                errors.append(repr(exc))

    await admin.client_pause(PAUSE_MS)  # in effect before the requesters start
    await asyncio.gather(*(requester(i) for i in range(REQUESTERS)))
    return errors


def check(world: str, errors: list[str], control: list[str], loads: int) -> None:
    total = REQUESTERS * PER_REQUESTER
    print(
        f"\n{world}: seawall.Cache {len(errors)} errors in {total} requests ({loads} loads); "
        f"plain GET/SET {len(control)} errors ({100 * len(control) / total:.0f}%)"
    )
    assert errors == [], errors[:3]
    # The control: the same load with plain commands runs out of connections.
    assert len(control) > 0 and all("MaxConnectionsError" in e for e in control), control[:3]


@pytest.mark.parametrize("world", ["sync", "async"])
def test_200_requesters_on_a_pool_of_100_never_run_out(standalone: Target, world: str) -> None:
    # Half the keys are in Redis already (hits), the other half are misses (loads).
    seawall.Cache(standalone.sync(), "pool", ttl=60, l1_size=0).warm(
        {f"k{i}": f"k{i}" for i in range(0, KEYS, 2)}
    )
    if world == "sync":
        pool = redis.ConnectionPool.from_url(standalone.url, max_connections=POOL)
        r = redis.Redis(connection_pool=pool)
        cache = seawall.Cache(r, "pool", ttl=60)

        def load(key: str) -> str:
            time.sleep(0.002)  # a quick query: the connection is free meanwhile
            return key

        def plain(key: str) -> None:
            if r.get(f"plain:{key}") is None:
                time.sleep(0.002)
                r.set(f"plain:{key}", key)

        admin = standalone.sync()
        errors = in_threads(lambda key: cache.get_or_load(key, lambda: load(key)), admin)
        control = in_threads(plain, admin)
        check(world, errors, control, cache.stats().loads)
        r.close()
        return

    async def main() -> None:
        pool = redis.asyncio.ConnectionPool.from_url(standalone.url, max_connections=POOL)
        r = redis.asyncio.Redis(connection_pool=pool)
        cache = seawall.aio.Cache(r, "pool", ttl=60)

        async def load(key: str) -> str:
            await asyncio.sleep(0.002)
            return key

        async def plain(key: str) -> None:
            if await r.get(f"plain:{key}") is None:
                await asyncio.sleep(0.002)
                await r.set(f"plain:{key}", key)

        admin = standalone.aio()
        errors = await in_tasks(lambda key: cache.get_or_load(key, lambda: load(key)), admin)
        control = await in_tasks(plain, admin)
        check(world, errors, control, cache.stats().loads)
        await r.aclose()
        await admin.aclose()

    asyncio.run(main())
