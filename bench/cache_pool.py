"""200 concurrent requesters in one process, redis-py's pool bounded to 100 connections.

Each round, 200 requesters (asyncio tasks, or threads for the sync clients) read at once
through one client whose ConnectionPool has max_connections=100: first 200 distinct cold
keys (every read misses; the loader takes 20 ms), then the same keys again, warm. Plain
cache-aside with redis-py (GET, on a miss load and SET) needs a connection per requester
and gets "Too many connections" errors; seawall.Cache queues its calls for a free
connection. Counted: requests that raised, and the round's wall time.

    PYTHONPATH=src .venv/bin/python bench/cache_pool.py [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import redis
import redis.asyncio
from _harness import (
    Column,
    Goal,
    Table,
    format_goals,
    format_table,
    machine_note,
    parse_args,
    server_note,
    unique_name,
    write_json,
)

import seawall
import seawall.aio

REQUESTERS = 200
POOL = 100
LOADER_SECONDS = 0.02

CONTENDERS = [
    "redis-py cache-aside",
    "seawall.Cache",
    "redis.asyncio cache-aside",
    "seawall.aio.Cache",
]

COLUMNS = [
    Column("errors_cold", "errors/round (cold)", ".1f"),
    Column("errors_warm", "errors/round (warm)", ".1f"),
    Column("ms_cold", "round ms (cold)", ".0f"),
    Column("ms_warm", "round ms (warm)", ".0f"),
]
HEADLINE = "errors_cold"
FIRST = "contender"

GOALS = [
    Goal("seawall.Cache: no errors (cold)", "seawall.Cache", "errors_cold", "==", 0),
    Goal("seawall.Cache: no errors (warm)", "seawall.Cache", "errors_warm", "==", 0),
    Goal("seawall.aio.Cache: no errors (cold)", "seawall.aio.Cache", "errors_cold", "==", 0),
    Goal("seawall.aio.Cache: no errors (warm)", "seawall.aio.Cache", "errors_warm", "==", 0),
    Goal("redis-py fails some (cold)", "redis-py cache-aside", "errors_cold", ">=", 1),
    Goal("redis.asyncio fails some (cold)", "redis.asyncio cache-aside", "errors_cold", ">=", 1),
]


def _value(key: str) -> dict[str, Any]:
    return {"key": key, "payload": "x" * 100}


def sync_round(read: Callable[[str], Any], keys: list[str]) -> tuple[int, float]:
    """All requesters at once (they meet at a barrier); (errors, seconds)."""
    errors: list[BaseException] = []
    gate = threading.Barrier(len(keys))

    def requester(key: str) -> None:
        gate.wait()
        try:
            read(key)
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=requester, args=(key,)) for key in keys]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return len(errors), time.perf_counter() - started


async def async_round(read: Callable[[str], Any], keys: list[str]) -> tuple[int, float]:
    started = time.perf_counter()
    found = await asyncio.gather(*(read(key) for key in keys), return_exceptions=True)
    errors = sum(isinstance(item, Exception) for item in found)
    return errors, time.perf_counter() - started


def sync_reader(name: str, url: str, run_id: str) -> Callable[[str], Any]:
    client = redis.Redis.from_url(url, max_connections=POOL)
    if name == "seawall.Cache":
        cache = seawall.Cache(client, run_id, ttl=60, l1_size=0)

        def read_seawall(key: str) -> Any:
            def loader() -> Any:
                time.sleep(LOADER_SECONDS)
                return _value(key)

            return cache.get_or_load(key, loader)

        return read_seawall

    def read_plain(key: str) -> Any:
        found = client.get(f"{run_id}:{key}")
        if found is not None:
            return json.loads(found)
        time.sleep(LOADER_SECONDS)
        value = _value(key)
        client.set(f"{run_id}:{key}", json.dumps(value), ex=60)
        return value

    return read_plain


def async_reader(name: str, url: str, run_id: str) -> Callable[[str], Any]:
    client = redis.asyncio.Redis.from_url(url, max_connections=POOL)
    if name == "seawall.aio.Cache":
        cache = seawall.aio.Cache(client, run_id, ttl=60, l1_size=0)

        async def read_seawall(key: str) -> Any:
            async def loader() -> Any:
                await asyncio.sleep(LOADER_SECONDS)
                return _value(key)

            return await cache.get_or_load(key, loader)

        return read_seawall

    async def read_plain(key: str) -> Any:
        found = await client.get(f"{run_id}:{key}")
        if found is not None:
            return json.loads(found)
        await asyncio.sleep(LOADER_SECONDS)
        value = _value(key)
        await client.set(f"{run_id}:{key}", json.dumps(value), ex=60)
        return value

    return read_plain


def measure(url: str, name: str, rounds: int) -> dict[str, float]:
    """`rounds` pairs of rounds (cold keys, then the same keys warm); L1 off for seawall,
    so every read goes to Redis."""
    run_id = unique_name("pool")
    figures: dict[str, list[float]] = {
        "errors_cold": [],
        "errors_warm": [],
        "ms_cold": [],
        "ms_warm": [],
    }
    is_async = name in ("redis.asyncio cache-aside", "seawall.aio.Cache")

    async def run_async() -> None:
        read = async_reader(name, url, run_id)
        for number in range(rounds):
            keys = [f"{number}:{i}" for i in range(REQUESTERS)]
            for phase in ("cold", "warm"):
                errors, seconds = await async_round(read, keys)
                figures[f"errors_{phase}"].append(errors)
                figures[f"ms_{phase}"].append(seconds * 1000)

    if is_async:
        asyncio.run(run_async())
    else:
        read = sync_reader(name, url, run_id)
        for number in range(rounds):
            keys = [f"{number}:{i}" for i in range(REQUESTERS)]
            for phase in ("cold", "warm"):
                errors, seconds = sync_round(read, keys)
                figures[f"errors_{phase}"].append(errors)
                figures[f"ms_{phase}"].append(seconds * 1000)
    admin = redis.Redis.from_url(url)
    for key in admin.scan_iter(match=f"*{run_id}*", count=1000):
        admin.delete(key)
    admin.close()
    # errors: the mean per round (every error counts); times: the median round
    return {
        "errors_cold": sum(figures["errors_cold"]) / rounds,
        "errors_warm": sum(figures["errors_warm"]) / rounds,
        "ms_cold": sorted(figures["ms_cold"])[rounds // 2],
        "ms_warm": sorted(figures["ms_warm"])[rounds // 2],
    }


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rounds", type=int, default=5)


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], _arguments)
    rounds = 2 if args.quick else args.rounds
    table: Table = {}
    with seawall.server() as url:
        admin = redis.Redis.from_url(url)
        print(f"cache_pool: {machine_note()}; {server_note(admin)}")
        admin.close()
        print(
            f"{REQUESTERS} requesters at once, pool max_connections={POOL}, loader "
            f"{LOADER_SECONDS * 1000:.0f} ms, {rounds} cold + {rounds} warm rounds\n"
        )
        for name in CONTENDERS:
            table[name] = row = measure(url, name, rounds)
            print(
                f"  {name}: {row['errors_cold']:.1f} errors/round cold, "
                f"{row['errors_warm']:.1f} warm"
            )
    print()
    print(format_table(COLUMNS, table, first=FIRST))
    print("\nGoals:\n" + format_goals(GOALS, table))
    write_json(args.json, "cache_pool", table, {"rounds": rounds})


if __name__ == "__main__":
    main()
