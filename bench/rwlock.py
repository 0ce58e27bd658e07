"""RWLock acquire+release cycles per second, side by side with seawall.Lock in one run.

One process, nobody else wanting the lock: the cost of a read (or write) hold against a
plain lock hold. No other Python library offers a Redis reader-writer lock to compare
with, so the baseline is seawall's own Lock (redis-py's Lock for scale). Contenders take
turns in rounds (forward, then reverse order), so a noisy neighbour slows all alike.

    PYTHONPATH=src .venv/bin/python bench/rwlock.py [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import redis
import redis.asyncio
from _harness import (
    Column,
    Goal,
    Table,
    counting_requests,
    format_goals,
    format_table,
    machine_note,
    median,
    parse_args,
    server_note,
    unique_name,
    write_json,
)

import seawall
import seawall.aio

TTL = 30.0
BATCH = 20
WARMUP_CYCLES = 300
COUNT_CYCLES = 1000

Cycle = Callable[[], Any]


def _hold(side: Any) -> Cycle:
    def cycle() -> None:
        side.acquire()
        side.release()

    return cycle


def _hold_async(side: Any) -> Callable[[], Awaitable[None]]:
    async def cycle() -> None:
        await side.acquire()
        await side.release()

    return cycle


# contender -> (baseline, world)
CONTENDERS = {
    "seawall.Lock": ("seawall.Lock", "sync"),
    "redis-py Lock": ("seawall.Lock", "sync"),
    "RWLock read": ("seawall.Lock", "sync"),
    "RWLock write": ("seawall.Lock", "sync"),
    "seawall.aio.Lock": ("seawall.aio.Lock", "async"),
    "aio RWLock read": ("seawall.aio.Lock", "async"),
    "aio RWLock write": ("seawall.aio.Lock", "async"),
}

COLUMNS = [
    Column("ops", "cycles/s", ",.0f"),
    Column("us", "us/cycle", ".0f"),
    Column("ratio", "x seawall Lock", ".2f"),
    Column("requests", "requests/cycle", ".2f"),
]
HEADLINE = "ops"
FIRST = "contender"
GOALS = [
    Goal("RWLock read >= 0.8 x seawall.Lock cycles/s", "RWLock read", "ratio", ">=", 0.8),
    Goal("RWLock read <= 2 requests per cycle", "RWLock read", "requests", "<=", 2.0),
    Goal("RWLock write <= 2 requests per cycle", "RWLock write", "requests", "<=", 2.0),
]


def build(client: redis.Redis, aclient: redis.asyncio.Redis, run_id: str) -> dict[str, Cycle]:
    rw = seawall.RWLock(client, f"{run_id}:rw", ttl=TTL)
    arw = seawall.aio.RWLock(aclient, f"{run_id}:arw", ttl=TTL)
    return {
        "seawall.Lock": _hold(seawall.Lock(client, f"{run_id}:lock", ttl=TTL)),
        "redis-py Lock": _hold(client.lock(f"{run_id}:redis-py", timeout=TTL)),
        "RWLock read": _hold(rw.read()),
        "RWLock write": _hold(rw.write()),
        "seawall.aio.Lock": _hold_async(seawall.aio.Lock(aclient, f"{run_id}:alock", ttl=TTL)),
        "aio RWLock read": _hold_async(arw.read()),
        "aio RWLock write": _hold_async(arw.write()),
    }


def run(
    runner: asyncio.Runner, name: str, cycle: Cycle, count: int | None, seconds: float
) -> float:
    """Cycles per second of one round (`count` cycles, or as many as fit in `seconds`)."""

    async def loop_async() -> tuple[int, float]:
        done, start = 0, time.perf_counter()
        while True:
            for _ in range(BATCH if count is None else count):
                await cycle()
            done += BATCH if count is None else count
            if count is not None or time.perf_counter() >= start + seconds:
                return done, time.perf_counter() - start

    def loop_sync() -> tuple[int, float]:
        done, start = 0, time.perf_counter()
        while True:
            for _ in range(BATCH if count is None else count):
                cycle()
            done += BATCH if count is None else count
            if count is not None or time.perf_counter() >= start + seconds:
                return done, time.perf_counter() - start

    if CONTENDERS[name][1] == "async":
        done, elapsed = runner.run(loop_async())
    else:
        done, elapsed = loop_sync()
    return done / elapsed


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], _arguments)
    seconds = 0.3 if args.quick else args.round_seconds
    passes = 3 if args.quick else args.passes
    names = list(CONTENDERS)
    with seawall.server() as url, asyncio.Runner() as runner:
        client = redis.Redis.from_url(url)
        aclient = redis.asyncio.Redis.from_url(url)
        cycles = build(client, aclient, unique_name("rwlock"))
        print(f"rwlock: {machine_note()}; {server_note(client)}")
        print(f"{passes} passes x {len(names)} contenders x {seconds:g} s rounds, ttl {TTL:g} s\n")
        for name in names:
            run(runner, name, cycles[name], WARMUP_CYCLES, 0)
        rounds: dict[str, list[float]] = {name: [] for name in names}
        for index in range(passes):
            for name in names if index % 2 == 0 else names[::-1]:
                rounds[name].append(run(runner, name, cycles[name], None, seconds))
            print(
                f"  pass {index + 1}/{passes}: "
                + ", ".join(f"{name} {rounds[name][-1]:,.0f}" for name in names)
            )
        requests = {}
        for name in names:
            with counting_requests() as counter:
                run(runner, name, cycles[name], COUNT_CYCLES, 0)
            requests[name] = counter.requests / COUNT_CYCLES
        runner.run(aclient.aclose())
        client.close()
    table: Table = {}
    for name in names:
        baseline = rounds[CONTENDERS[name][0]]
        table[name] = {
            "ops": median(rounds[name]),
            "us": 1e6 / median(rounds[name]),
            # Same pass, back to back: the ratio is spared most of the machine's drift.
            "ratio": median([a / b for a, b in zip(rounds[name], baseline, strict=True)]),
            "requests": requests[name],
        }
    print()
    print(format_table(COLUMNS, table, first=FIRST))
    print(
        "\nx seawall Lock: median over passes of cycles/s divided by seawall.Lock's (sync) or "
        "seawall.aio.Lock's\n(async) in the same pass. requests: round trips counted in redis-py."
    )
    print("\nGoals:\n" + format_goals(GOALS, table))
    write_json(args.json, "rwlock", table, {"passes": passes, "seconds": seconds})


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--round-seconds", type=float, default=1.0, help="length of a round")
    parser.add_argument("--passes", type=int, default=7, help="rounds per contender")


if __name__ == "__main__":
    main()
