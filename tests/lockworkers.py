"""Code that runs in child processes of the lock tests (multiprocessing "spawn").

Every worker builds its own client from (url, cluster, world): world is "sync" or "async".
Timestamps use time.monotonic_ns(), which on Linux is one clock for all processes, so
entry/exit intervals from different processes can be compared in a ledger.
"""

from __future__ import annotations

import asyncio
import time
from multiprocessing.connection import Connection
from typing import Any

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster

import seawall
import seawall.aio


def sync_client(url: str, cluster: bool, **kwargs: Any) -> Any:
    if cluster:
        return redis.cluster.RedisCluster.from_url(url, **kwargs)
    return redis.Redis.from_url(url, **kwargs)


def async_client(url: str, cluster: bool, **kwargs: Any) -> Any:
    if cluster:
        return redis.asyncio.cluster.RedisCluster.from_url(url, **kwargs)
    return redis.asyncio.Redis.from_url(url, **kwargs)


def counter_key(name: str) -> str:
    # Same hash tag as the lock, as a user co-locating data with its lock would.
    return f"{{{name}}}:counter"


def count_under_lock(
    url: str, cluster: bool, world: str, name: str, n: int, ttl: float
) -> list[tuple[int, int]]:
    """n acquisitions; each does GET then SET of the counter. Returns (enter, exit) ns."""
    if world == "async":
        return asyncio.run(_count_async(url, cluster, name, n, ttl))
    r = sync_client(url, cluster)
    lock = seawall.Lock(r, name, ttl=ttl, timeout=30)
    ledger = []
    key = counter_key(name)
    for _ in range(n):
        with lock:
            entered = time.monotonic_ns()
            value = int(r.get(key) or 0)
            r.set(key, value + 1)
            ledger.append((entered, time.monotonic_ns()))
    r.close()
    return ledger


async def _count_async(url: str, cluster: bool, name: str, n: int, ttl: float) -> list[Any]:
    r = async_client(url, cluster)
    lock = seawall.aio.Lock(r, name, ttl=ttl, timeout=30)
    ledger = []
    key = counter_key(name)
    for _ in range(n):
        async with lock:
            entered = time.monotonic_ns()
            value = int(await r.get(key) or 0)
            await r.set(key, value + 1)
            ledger.append((entered, time.monotonic_ns()))
    await r.aclose()
    return ledger


def holder(url: str, cluster: bool, world: str, name: str, ttl: float, pipe: Connection) -> None:
    """Acquire on command and report; used by the SIGKILL and SIGSTOP tests.

    Commands on `pipe`: ("acquire",) -> ("held", fence); ("finish", key, value) -> a
    fenced write with the current fence, then release: ("finished", written, release
    outcome, on_lost fired).
    """
    if world == "async":
        asyncio.run(_holder_async(url, cluster, name, ttl, pipe))
        return
    r = sync_client(url, cluster)
    lost: list[int] = []
    lock = seawall.Lock(r, name, ttl=ttl, on_lost=lambda lk: lost.append(lk.fence))
    while True:
        command = pipe.recv()
        if command[0] == "acquire":
            lock.acquire()
            pipe.send(("held", lock.fence))
        elif command[0] == "finish":
            written = seawall.fenced_write(r, command[1], command[2], lock.fence)
            try:
                lock.release()
                outcome = "released"
            except seawall.LockNotOwnedError:
                outcome = "not-owned"
            pipe.send(("finished", written, outcome, list(lost)))
            lost.clear()
        else:
            return


async def _holder_async(url: str, cluster: bool, name: str, ttl: float, pipe: Connection) -> None:
    r = async_client(url, cluster)
    lost: list[int] = []
    lock = seawall.aio.Lock(r, name, ttl=ttl, on_lost=lambda lk: lost.append(lk.fence))
    loop = asyncio.get_running_loop()
    while True:
        # Poll the pipe from a thread so the renewer task keeps running meanwhile.
        command = await loop.run_in_executor(None, pipe.recv)
        if command[0] == "acquire":
            await lock.acquire()
            pipe.send(("held", lock.fence))
        elif command[0] == "finish":
            written = await seawall.aio.fenced_write(r, command[1], command[2], lock.fence)
            try:
                await lock.release()
                outcome = "released"
            except seawall.LockNotOwnedError:
                outcome = "not-owned"
            pipe.send(("finished", written, outcome, list(lost)))
            lost.clear()
        else:
            await r.aclose()
            return


def contend(url: str, name: str, seconds: float, start_at: float) -> list[float]:
    """Acquire/release in a tight loop for `seconds` from wall-clock `start_at` (so that
    every process contends over the same window); returns each acquisition's wait (s)."""
    r = redis.Redis.from_url(url)
    lock = seawall.Lock(r, name, ttl=10.0, timeout=30)
    r.ping()  # connected before the window
    waits = []
    time.sleep(max(0.0, start_at - time.time()))
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        started = time.monotonic()
        with lock:
            waits.append(time.monotonic() - started)
            r.incr(counter_key(name))
    r.close()
    return waits


def wait_for_lock(url: str, name: str, ready: Any) -> None:
    """Block on a held lock (queued in Redis) until killed."""
    r = redis.Redis.from_url(url)
    lock = seawall.Lock(r, name, ttl=10.0)
    ready.set()
    lock.acquire()
    time.sleep(60)
