"""Code that runs in child processes of the cache tests (multiprocessing "spawn").

Loaders count their calls in Redis (INCR), so a count is exact across processes.
Timestamps use time.monotonic_ns(), one clock for all processes on Linux.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

from lockworkers import async_client, sync_client

import seawall
import seawall.aio


def calls_key(name: str) -> str:
    return f"test:calls:{{{name}}}"


# --- acceptance 1: one stampede on one missing key --------------------------------------------


def stampede(
    url: str, cluster: bool, world: str, name: str, callers: int, go: Any, loader_s: float
) -> list[tuple[Any, float]]:
    """`callers` concurrent get_or_load of one key once `go` is set.

    Returns each caller's (answer, seconds it took). With lease=5, a caller whose wake-up
    was lost would only look again when the lease ran out, seconds later.
    """
    if world == "async":
        return asyncio.run(_stampede_async(url, cluster, name, callers, go, loader_s))
    r = sync_client(url, cluster)
    cache = seawall.Cache(r, name, ttl=30, lease=5)

    def loader() -> Any:
        r.incr(calls_key(name))
        time.sleep(loader_s)
        return {"value": name}

    answers: list[tuple[Any, float]] = []

    def caller() -> None:
        started = time.monotonic()
        answer = cache.get_or_load("hot", loader)
        answers.append((answer, time.monotonic() - started))

    threads = [threading.Thread(target=caller, daemon=True) for _ in range(callers)]
    go.wait(30)
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    r.close()
    return answers


async def _stampede_async(
    url: str, cluster: bool, name: str, callers: int, go: Any, loader_s: float
) -> list[tuple[Any, float]]:
    r = async_client(url, cluster)
    cache = seawall.aio.Cache(r, name, ttl=30, lease=5)

    async def loader() -> Any:
        await r.incr(calls_key(name))
        await asyncio.sleep(loader_s)
        return {"value": name}

    if go is not None:
        await asyncio.get_running_loop().run_in_executor(None, go.wait, 30)

    async def caller() -> tuple[Any, float]:
        started = time.monotonic()
        answer = await cache.get_or_load("hot", loader)
        return answer, time.monotonic() - started

    answers = await asyncio.gather(*(caller() for _ in range(callers)))
    await r.aclose()
    return list(answers)


# --- acceptance 2: the loading process is killed ------------------------------------------------


def load_once(
    url: str, cluster: bool, world: str, name: str, lease: float, loader_s: float, go: Any
) -> tuple[Any, int]:
    """One get_or_load once `go` is set; returns (answer, monotonic_ns when it returned)."""
    go.wait(30)
    if world == "async":
        return asyncio.run(_load_once_async(url, cluster, name, lease, loader_s))
    r = sync_client(url, cluster)
    cache = seawall.Cache(r, name, ttl=30, lease=lease)

    def loader() -> Any:
        r.incr(calls_key(name))
        time.sleep(loader_s)
        return f"loaded-by-{name}-{loader_s}"

    answer = cache.get_or_load("victim", loader)
    return answer, time.monotonic_ns()


async def _load_once_async(
    url: str, cluster: bool, name: str, lease: float, loader_s: float
) -> tuple[Any, int]:
    r = async_client(url, cluster)
    cache = seawall.aio.Cache(r, name, ttl=30, lease=lease)

    async def loader() -> Any:
        await r.incr(calls_key(name))
        await asyncio.sleep(loader_s)
        return f"loaded-by-{name}-{loader_s}"

    answer = await cache.get_or_load("victim", loader)
    await r.aclose()
    return answer, time.monotonic_ns()


# --- acceptance 3: stale set against a real database -------------------------------------------


def db_connect(db: tuple[str, str]) -> Any:
    kind, where = db
    if kind == "sqlite":
        return sqlite3.connect(where, timeout=10, isolation_level=None)
    import psycopg  # only when DATABASE_URL is set

    # DATABASE_URL is a SQLAlchemy URL ("postgresql+psycopg://..."); libpq wants the plain
    # scheme.
    scheme, sep, rest = where.partition("://")
    return psycopg.connect(scheme.split("+", 1)[0] + sep + rest, autocommit=True)


def db_read(db: tuple[str, str], row: int) -> str | None:
    mark = "?" if db[0] == "sqlite" else "%s"
    conn = db_connect(db)
    try:
        found = conn.execute(f"SELECT value FROM cache_rows WHERE id = {mark}", (row,)).fetchone()
        return None if found is None else str(found[0])
    finally:
        conn.close()


def db_write(db: tuple[str, str], row: int, value: str) -> None:
    mark = "?" if db[0] == "sqlite" else "%s"
    conn = db_connect(db)
    try:
        conn.execute(f"UPDATE cache_rows SET value = {mark} WHERE id = {mark}", (value, row))
    finally:
        conn.close()


def stale_reader(url: str, cluster: bool, db: tuple[str, str], name: str, pipe: Connection) -> None:
    """Commands: ("load",) -> get_or_load whose loader reports ("read", value) after reading
    the database, then waits a moment (the test stops the process there) before returning;
    answers ("loaded", value). ("get",) -> ("got", get_or_load with a plain loader)."""
    r = sync_client(url, cluster)
    cache = seawall.Cache(r, name, ttl=30, lease=1.0, l1_ttl=5.0)

    def slow_loader() -> Any:
        value = db_read(db, 1)
        pipe.send(("read", value))
        time.sleep(0.3)  # the test SIGSTOPs the process here, between read and write-back
        return value

    while True:
        command = pipe.recv()
        if command[0] == "load":
            pipe.send(("loaded", cache.get_or_load("row:1", slow_loader)))
        elif command[0] == "get":
            answer = cache.get_or_load("row:1", lambda: db_read(db, 1))
            pipe.send(("got", answer, cache.stats().voided))
        else:
            r.close()
            return


# --- acceptance 6: penetration by absent ids ---------------------------------------------------


def absent_requests(
    url: str, cluster: bool, name: str, ids: list[int], seed: int, go: Any
) -> tuple[int, int]:
    """get_or_load of each id in `ids` (shuffled); the loader finds nothing.

    Returns (requests answered, loader calls): counted here, which spares a round trip
    per load; the sum over all processes is the exact total."""
    r = sync_client(url, cluster)
    cache = seawall.Cache(r, name, ttl=30, absent_ttl=60)
    order = list(ids)
    random.Random(seed).shuffle(order)

    calls = []

    def loader() -> Any:
        calls.append(1)
        return None

    answers: list[Any] = []

    def requester(rows: list[int]) -> None:
        for row in rows:
            answers.append(cache.get_or_load(row, loader))

    # Four threads per process: their round trips overlap.
    threads = [threading.Thread(target=requester, args=(order[i::4],)) for i in range(4)]
    go.wait(30)
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    r.close()
    assert answers == [None] * len(order)
    return len(answers), len(calls)


def report(results: Any, index: int, function: Any, *args: Any) -> None:
    """Run `function(*args)` and put (index, result or the error's repr) on `results`."""
    try:
        results.put((index, function(*args), None))
    except BaseException as exc:
        results.put((index, None, repr(exc)))
        raise


# --- acceptance 9: a write elsewhere reaches this process's L1 -----------------------------


def l1_reader(url: str, cluster: bool, world: str, name: str, pipe: Connection) -> None:
    """Process B: a Cache whose L1 would keep a value for 60 s, so only an invalidation (or
    a lost invalidation connection) makes it read Redis again. Commands:

    ("prime", keys) -> ("primed", how many keys are now in L1 with their value);
    ("watch", keys, value, timeout) -> {key: monotonic_ns when get(key) first returned
    `value`}, keys taken in order, each polled until then;
    ("peek", keys) -> the values get() returns now, and stats().l1_hits;
    ("stop",).
    """
    if world == "async":
        asyncio.run(_l1_reader_async(url, cluster, name, pipe))
        return
    r = sync_client(url, cluster)
    cache = seawall.Cache(r, name, ttl=300, l1_ttl=60)
    listener = cache._listener()
    assert listener is not None and listener.wait_listening(20)
    while True:
        command = pipe.recv()
        if command[0] == "prime":
            values = [cache.get_or_load(key, lambda: "unused") for key in command[1]]
            held = sum(1 for key in command[1] if key in cache.l1._entries)
            pipe.send(("primed", held, values))
        elif command[0] == "watch":
            _, keys, value, timeout = command
            seen: dict[str, int] = {}
            deadline = time.monotonic() + timeout
            for key in keys:
                while time.monotonic() < deadline:
                    if cache.get(key) == value:
                        seen[key] = time.monotonic_ns()
                        break
                    time.sleep(0.0002)  # a test's poll, not the library's
            pipe.send(seen)
        elif command[0] == "peek":
            pipe.send(([cache.get(key) for key in command[1]], cache.stats().l1_hits))
        else:
            r.close()
            return


async def _l1_reader_async(url: str, cluster: bool, name: str, pipe: Connection) -> None:
    r = async_client(url, cluster)
    cache = seawall.aio.Cache(r, name, ttl=300, l1_ttl=60)
    listener = cache._listener()
    assert listener is not None and await listener.wait_listening(20)

    async def unused() -> str:
        return "unused"

    loop = asyncio.get_running_loop()
    while True:
        # Wait for a command in a thread: the listener task keeps running meanwhile.
        command = await loop.run_in_executor(None, pipe.recv)
        if command[0] == "prime":
            values = [await cache.get_or_load(key, unused) for key in command[1]]
            held = sum(1 for key in command[1] if key in cache.l1._entries)
            pipe.send(("primed", held, values))
        elif command[0] == "watch":
            _, keys, value, timeout = command
            seen: dict[str, int] = {}
            deadline = time.monotonic() + timeout
            for key in keys:
                while time.monotonic() < deadline:
                    if await cache.get(key) == value:
                        seen[key] = time.monotonic_ns()
                        break
                    # An L1 hit never yields: let the listener task run.
                    await asyncio.sleep(0.0002)
            pipe.send(seen)
        elif command[0] == "peek":
            pipe.send(([await cache.get(key) for key in command[1]], cache.stats().l1_hits))
        else:
            await r.aclose()
            return
