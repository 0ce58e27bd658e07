"""Semaphore acquire+release cycles per second, and requests per cycle, against seawall.Lock.

One process, one name per contender, nobody else wanting it: the cost of taking and giving
back one permit, next to the cost of the lock in the same run. Contenders take turns in
rounds (A, B, C, ... then the reverse order), so a noisy neighbour slows all of them alike;
each contender's figure is the median of its rounds, and its ratio the median of the
per-pass ratios to its baseline.

The "zset recipe" is the semaphore users write by hand from blog posts: one pipeline of
ZREMRANGEBYSCORE (expired holders, by the client's clock), ZADD and ZRANK, and a ZREM to
give the permit back. It is unsafe (client clocks decide expiry; no renewal; no fairness;
a late holder's ZREM is never refused) and is here only to show what the safe form costs.

    PYTHONPATH=src .venv/bin/python bench/semaphore.py [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
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
    interleaved_rounds,
    machine_note,
    parse_args,
    round_figures,
    server_commands,
    server_note,
    unique_name,
    write_json,
)

import seawall
import seawall.aio

TTL = 30.0
PERMITS = 3
BATCH = 20  # cycles between clock reads
WARMUP_CYCLES = 300
COUNT_CYCLES = 2000

SyncCycle = Callable[[], None]
AsyncCycle = Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class Contender:
    name: str
    baseline: str  # the contender the ratio compares with
    make_sync: Callable[[redis.Redis, str], SyncCycle] | None = None
    make_async: Callable[[redis.asyncio.Redis, str], AsyncCycle] | None = None


def _lock(client: redis.Redis, name: str) -> SyncCycle:
    lock = seawall.Lock(client, name, ttl=TTL)

    def cycle() -> None:
        lock.acquire()
        lock.release()

    return cycle


def _semaphore(client: redis.Redis, name: str) -> SyncCycle:
    sem = seawall.Semaphore(client, name, value=PERMITS, ttl=TTL)

    def cycle() -> None:
        sem.acquire()
        sem.release()

    return cycle


def _zset_recipe(client: redis.Redis, name: str) -> SyncCycle:
    def cycle() -> None:
        token = uuid.uuid4().hex
        now = time.time()
        with client.pipeline(transaction=True) as pipe:
            pipe.zremrangebyscore(name, "-inf", now - TTL)
            pipe.zadd(name, {token: now})
            pipe.zrank(name, token)
            rank = pipe.execute()[-1]
        if rank >= PERMITS:  # never here: nobody else wants it
            raise RuntimeError("no permit")
        client.zrem(name, token)

    return cycle


def _aio_lock(client: redis.asyncio.Redis, name: str) -> AsyncCycle:
    lock = seawall.aio.Lock(client, name, ttl=TTL)

    async def cycle() -> None:
        await lock.acquire()
        await lock.release()

    return cycle


def _aio_semaphore(client: redis.asyncio.Redis, name: str) -> AsyncCycle:
    sem = seawall.aio.Semaphore(client, name, value=PERMITS, ttl=TTL)

    async def cycle() -> None:
        await sem.acquire()
        await sem.release()

    return cycle


CONTENDERS = [
    Contender("seawall.Semaphore", "seawall.Lock", make_sync=_semaphore),
    Contender("seawall.Lock", "seawall.Lock", make_sync=_lock),
    Contender("zset recipe (unsafe)", "seawall.Lock", make_sync=_zset_recipe),
    Contender("seawall.aio.Semaphore", "seawall.aio.Lock", make_async=_aio_semaphore),
    Contender("seawall.aio.Lock", "seawall.aio.Lock", make_async=_aio_lock),
]

COLUMNS = [
    Column("ops", "cycles/s", ",.0f"),
    Column("ops_min", "min", ",.0f"),
    Column("ops_max", "max", ",.0f"),
    Column("us", "us/cycle", ".0f"),
    Column("cpu_us", "CPU us/cycle", ".0f"),
    Column("ratio", "x Lock", ".2f"),
    Column("requests", "requests/cycle", ".2f"),
    Column("server_cmds", "server cmds/cycle", ".2f"),
]
HEADLINE = "ops"
FIRST = "contender"

GOALS = [
    Goal(
        "seawall.Semaphore >= 0.8 x seawall.Lock cycles/s",
        "seawall.Semaphore",
        "ratio",
        ">=",
        0.8,
    ),
    Goal(
        "seawall.aio.Semaphore >= 0.8 x seawall.aio.Lock cycles/s",
        "seawall.aio.Semaphore",
        "ratio",
        ">=",
        0.8,
    ),
    Goal("seawall.Semaphore <= 2 requests per cycle", "seawall.Semaphore", "requests", "<=", 2),
    Goal(
        "seawall.aio.Semaphore <= 2 requests per cycle",
        "seawall.aio.Semaphore",
        "requests",
        "<=",
        2,
    ),
]


def run_sync(cycle: SyncCycle, count: int | None, seconds: float) -> tuple[int, float]:
    """Run `count` cycles, or as many as fit in `seconds`; (cycles, elapsed seconds)."""
    done = 0
    start = time.perf_counter()
    end = start + seconds
    while True:
        for _ in range(BATCH if count is None else count):
            cycle()
        done += BATCH if count is None else count
        now = time.perf_counter()
        if count is not None or now >= end:
            return done, now - start


async def run_async(cycle: AsyncCycle, count: int | None, seconds: float) -> tuple[int, float]:
    done = 0
    start = time.perf_counter()
    end = start + seconds
    while True:
        for _ in range(BATCH if count is None else count):
            await cycle()
        done += BATCH if count is None else count
        now = time.perf_counter()
        if count is not None or now >= end:
            return done, now - start


class Bench:
    def __init__(self, url: str, runner: asyncio.Runner) -> None:
        self.runner = runner
        self.client = redis.Redis.from_url(url)
        self.aclient = redis.asyncio.Redis.from_url(url)
        self.admin = redis.Redis.from_url(url)
        self.run_id = unique_name("semaphore")
        self.cycles: dict[str, Any] = {}
        for contender in CONTENDERS:
            name = f"{self.run_id}:{contender.name.replace(' ', '-')}"
            if contender.make_sync is not None:
                self.cycles[contender.name] = contender.make_sync(self.client, name)
            else:
                assert contender.make_async is not None
                self.cycles[contender.name] = contender.make_async(self.aclient, name)

    def run(
        self, contender: Contender, count: int | None, seconds: float = 0.0
    ) -> tuple[float, float]:
        """(cycles per second, CPU microseconds per cycle, all threads) of one round."""
        cycle = self.cycles[contender.name]
        cpu = time.process_time()
        if contender.make_sync is not None:
            done, elapsed = run_sync(cycle, count, seconds)
        else:
            done, elapsed = self.runner.run(run_async(cycle, count, seconds))
        return done / elapsed, (time.process_time() - cpu) * 1e6 / done

    def count(self, contender: Contender) -> tuple[float, float]:
        """(requests, server commands) per cycle over COUNT_CYCLES cycles (not timed)."""
        before = server_commands(self.admin)
        with counting_requests() as counter:
            self.run(contender, COUNT_CYCLES)
        # One of our INFO calls is counted in the difference.
        server_cmds = (server_commands(self.admin) - before - 1) / COUNT_CYCLES
        return counter.requests / COUNT_CYCLES, server_cmds

    def cleanup(self) -> None:
        for key in self.admin.scan_iter(match=f"*{self.run_id}*", count=1000):
            self.admin.delete(key)
        self.runner.run(self.aclient.aclose())
        self.client.close()
        self.admin.close()


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], _arguments)
    seconds = 0.5 if args.quick else args.round_seconds
    passes = 3 if args.quick else args.passes
    with seawall.server() as url, asyncio.Runner() as runner:
        bench = Bench(url, runner)
        try:
            print(f"semaphore: {machine_note()}; {server_note(bench.admin)}")
            print(
                f"{passes} passes x {len(CONTENDERS)} contenders x {seconds:g} s rounds, "
                f"{PERMITS} permits, ttl {TTL:g} s\n"
            )
            for contender in CONTENDERS:
                bench.run(contender, WARMUP_CYCLES)
            by_name = {c.name: c for c in CONTENDERS}
            rounds, cpu = interleaved_rounds(
                list(by_name), lambda name: bench.run(by_name[name], None, seconds), passes
            )
            counts = {c.name: bench.count(c) for c in CONTENDERS}
        finally:
            bench.cleanup()
    table: Table = {}
    for contender in CONTENDERS:
        table[contender.name] = {
            **round_figures(
                rounds[contender.name], rounds[contender.baseline], cpu[contender.name]
            ),
            "requests": counts[contender.name][0],
            "server_cmds": counts[contender.name][1],
        }
    print()
    print(format_table(COLUMNS, table, first=FIRST))
    print(
        "\nx Lock: median over passes of cycles/s divided by seawall.Lock's (sync) or "
        "seawall.aio.Lock's\n(async) in the same pass. requests: round trips counted in "
        "redis-py. server cmds: commands\nthe server ran, Lua-internal ones included."
    )
    print("\nGoals:\n" + format_goals(GOALS, table))
    write_json(args.json, "semaphore", table, {"passes": passes, "seconds": seconds})


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--round-seconds", type=float, default=1.0, help="length of a round")
    parser.add_argument("--passes", type=int, default=9, help="rounds per contender")


if __name__ == "__main__":
    main()
