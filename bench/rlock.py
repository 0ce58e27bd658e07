"""seawall.RLock against seawall.Lock: cycles/s in the same run, and requests per re-entry.

No widely used Python library offers a reentrant Redis lock, so the yardstick is
seawall.Lock, whose scripts RLock runs for the outermost hold. Contenders take turns in
rounds (A, B, C, ... then the reverse order), as in lock_uncontended.py; each figure is the
median of its rounds, and each ratio the median of same-pass ratios.

- "RLock": acquire + release of a free lock (the outermost hold: Lock's scripts).
- "RLock re-entry": acquire + release while the same thread/task already holds it.
- "RLock 3 deep": acquire three times, release three times.

    PYTHONPATH=src .venv/bin/python bench/rlock.py [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
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
WARMUP_CYCLES = 300
COUNT_CYCLES = 2000
BATCH = 20  # cycles between clock reads


def run_sync(cycle: Callable[[], Any], count: int | None, seconds: float) -> tuple[int, float]:
    """Run `count` cycles, or as many as fit in `seconds`; (cycles, elapsed seconds)."""
    done, start = 0, time.perf_counter()
    while True:
        for _ in range(BATCH if count is None else count):
            cycle()
        done += BATCH if count is None else count
        now = time.perf_counter()
        if count is not None or now >= start + seconds:
            return done, now - start


async def run_async(
    cycle: Callable[[], Awaitable[Any]], count: int | None, seconds: float
) -> tuple[int, float]:
    done, start = 0, time.perf_counter()
    while True:
        for _ in range(BATCH if count is None else count):
            await cycle()
        done += BATCH if count is None else count
        now = time.perf_counter()
        if count is not None or now >= start + seconds:
            return done, now - start


@dataclass(frozen=True)
class Contender:
    name: str
    baseline: str
    world: str  # "sync" or "async"
    lock_class: Any
    depth: int  # acquires (and releases) per cycle
    held: bool = False  # the cycle runs inside an outer hold (re-entry)


CONTENDERS = [
    Contender("seawall.Lock", "seawall.Lock", "sync", seawall.Lock, 1),
    Contender("seawall.RLock", "seawall.Lock", "sync", seawall.RLock, 1),
    Contender("seawall.RLock re-entry", "seawall.Lock", "sync", seawall.RLock, 1, held=True),
    Contender("seawall.RLock 3 deep", "seawall.Lock", "sync", seawall.RLock, 3),
    Contender("seawall.aio.Lock", "seawall.aio.Lock", "async", seawall.aio.Lock, 1),
    Contender("seawall.aio.RLock", "seawall.aio.Lock", "async", seawall.aio.RLock, 1),
    Contender(
        "seawall.aio.RLock re-entry",
        "seawall.aio.Lock",
        "async",
        seawall.aio.RLock,
        1,
        held=True,
    ),
]

COLUMNS = [
    Column("ops", "cycles/s", ",.0f"),
    Column("us", "us/cycle", ".0f"),
    Column("ratio", "x Lock", ".2f"),
    Column("requests", "requests/cycle", ".2f"),
    Column("per_entry", "requests/acquire", ".2f"),
]
HEADLINE = "ops"
FIRST = "contender"

GOALS = [
    Goal("RLock re-entry <= 1 round trip", "seawall.RLock re-entry", "per_entry", "<=", 1.0),
    Goal(
        "aio RLock re-entry <= 1 round trip",
        "seawall.aio.RLock re-entry",
        "per_entry",
        "<=",
        1.0,
    ),
    Goal("RLock outermost >= 0.9 x Lock cycles/s", "seawall.RLock", "ratio", ">=", 0.9),
]


class Bench:
    def __init__(self, url: str, runner: asyncio.Runner) -> None:
        self.runner = runner
        self.client = redis.Redis.from_url(url)
        self.aclient = redis.asyncio.Redis.from_url(url)
        self.run_id = unique_name("rlock")
        self.locks: dict[str, Any] = {}
        for c in CONTENDERS:
            client = self.client if c.world == "sync" else self.aclient
            self.locks[c.name] = c.lock_class(client, f"{self.run_id}:{c.name}", ttl=TTL)

    def cycle(self, contender: Contender) -> Callable[[], Any]:
        lock = self.locks[contender.name]
        depth = contender.depth
        if contender.world == "sync":

            def sync_cycle() -> None:
                for _ in range(depth):
                    lock.acquire()
                for _ in range(depth):
                    lock.release()

            return sync_cycle

        async def async_cycle() -> None:
            for _ in range(depth):
                await lock.acquire()
            for _ in range(depth):
                await lock.release()

        return async_cycle

    def run(self, contender: Contender, count: int | None, seconds: float = 0.0) -> float:
        """Cycles per second of one round (count cycles, or as many as fit in seconds)."""
        lock = self.locks[contender.name]
        cycle = self.cycle(contender)
        if contender.world == "sync":
            if contender.held:
                lock.acquire()
            done, elapsed = run_sync(cycle, count, seconds)
            if contender.held:
                lock.release()
            return done / elapsed

        async def in_one_task() -> tuple[int, float]:
            # The owner is the task: the outer hold and the cycles share one.
            if contender.held:
                await lock.acquire()
            result = await run_async(cycle, count, seconds)
            if contender.held:
                await lock.release()
            return result

        done, elapsed = self.runner.run(in_one_task())
        return done / elapsed

    def requests(self, contender: Contender) -> tuple[float, float]:
        """(requests per cycle, requests per acquire) over COUNT_CYCLES cycles."""
        lock = self.locks[contender.name]
        with counting_requests() as counter:
            self.run(contender, COUNT_CYCLES)
        per_cycle = counter.requests / COUNT_CYCLES
        if not contender.held:
            return per_cycle, float("nan")
        # Acquires alone: enter COUNT_CYCLES times without releasing in between.
        if contender.world == "sync":
            lock.acquire()
            with counting_requests() as counter:
                for _ in range(COUNT_CYCLES):
                    lock.acquire()
            for _ in range(COUNT_CYCLES + 1):
                lock.release()
        else:

            async def enter() -> int:
                await lock.acquire()
                with counting_requests() as inner:
                    for _ in range(COUNT_CYCLES):
                        await lock.acquire()
                for _ in range(COUNT_CYCLES + 1):
                    await lock.release()
                return inner.requests

            return per_cycle, self.runner.run(enter()) / COUNT_CYCLES
        return per_cycle, counter.requests / COUNT_CYCLES

    def cleanup(self) -> None:
        for key in self.client.scan_iter(match=f"*{self.run_id}*", count=1000):
            self.client.delete(key)
        self.runner.run(self.aclient.aclose())
        self.client.close()


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], _arguments)
    seconds = 0.5 if args.quick else args.round_seconds
    passes = 3 if args.quick else args.passes
    with seawall.server() as url, asyncio.Runner() as runner:
        bench = Bench(url, runner)
        try:
            print(f"rlock: {machine_note()}; {server_note(bench.client)}")
            print(f"{passes} passes x {len(CONTENDERS)} contenders x {seconds:g} s rounds\n")
            for contender in CONTENDERS:
                bench.run(contender, WARMUP_CYCLES)
            rounds: dict[str, list[float]] = {c.name: [] for c in CONTENDERS}
            for index in range(passes):
                order = CONTENDERS if index % 2 == 0 else CONTENDERS[::-1]
                for contender in order:
                    rounds[contender.name].append(bench.run(contender, None, seconds))
                print(
                    f"  pass {index + 1}/{passes}: "
                    + ", ".join(f"{c.name} {rounds[c.name][-1]:,.0f}" for c in CONTENDERS)
                )
            requests = {c.name: bench.requests(c) for c in CONTENDERS}
        finally:
            bench.cleanup()
    table: Table = {}
    for contender in CONTENDERS:
        samples = rounds[contender.name]
        paired = zip(samples, rounds[contender.baseline], strict=True)
        table[contender.name] = {
            "ops": median(samples),
            "us": 1e6 / median(samples),
            "ratio": median([mine / theirs for mine, theirs in paired]),
            "requests": requests[contender.name][0],
            "per_entry": requests[contender.name][1],
        }
    print()
    print(format_table(COLUMNS, table, first=FIRST))
    print(
        "\nx Lock: median over passes of cycles/s over seawall.Lock's (sync) or "
        "seawall.aio.Lock's (async)\nin the same pass. requests: round trips counted in "
        "redis-py; requests/acquire: of re-entries\nalone (the lock already held by the "
        "caller)."
    )
    print("\nGoals:\n" + format_goals(GOALS, table))
    write_json(args.json, "rlock", table, {"passes": passes, "seconds": seconds})


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--round-seconds", type=float, default=1.0, help="length of a round")
    parser.add_argument("--passes", type=int, default=7, help="rounds per contender")


if __name__ == "__main__":
    main()
