"""Uncontended acquire+release cycles per second, and requests per cycle.

One process, one lock per contender, nobody else wanting it: the cost of the lock itself.
The contenders take turns in rounds (A, B, C, ... then the reverse order), so a noisy
neighbour slows all of them alike; each contender's figure is the median of its rounds.

    PYTHONPATH=src .venv/bin/python bench/lock_uncontended.py [--quick] [--json PATH]
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
    command_calls,
    counting_requests,
    format_goals,
    format_table,
    interleaved_rounds,
    machine_note,
    parse_args,
    round_figures,
    server_commands,
    server_cpu,
    server_note,
    unique_name,
    write_json,
)
from _locks import SYNC_LOCKS, TTL, key_name, make_lock

import seawall
import seawall.aio

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


def _sync(library: str) -> Callable[[redis.Redis, str], SyncCycle]:
    def make(client: redis.Redis, name: str) -> SyncCycle:
        lock = make_lock(library, client, name)

        def cycle() -> None:
            lock.acquire()
            lock.release()

        return cycle

    return make


def _seawall_aio(client: redis.asyncio.Redis, name: str) -> AsyncCycle:
    lock = seawall.aio.Lock(client, name, ttl=TTL)

    async def cycle() -> None:
        await lock.acquire()
        await lock.release()

    return cycle


def _redis_asyncio(client: redis.asyncio.Redis, name: str) -> AsyncCycle:
    lock = client.lock(name, timeout=TTL)

    async def cycle() -> None:
        await lock.acquire()
        await lock.release()

    return cycle


CONTENDERS = [
    *(Contender(library, "redis-py Lock", make_sync=_sync(library)) for library in SYNC_LOCKS),
    Contender("seawall.aio.Lock", "redis.asyncio Lock", make_async=_seawall_aio),
    Contender("redis.asyncio Lock", "redis.asyncio Lock", make_async=_redis_asyncio),
]

COLUMNS = [
    Column("ops", "cycles/s", ",.0f"),
    Column("ops_min", "min", ",.0f"),
    Column("ops_max", "max", ",.0f"),
    Column("us", "us/cycle", ".0f"),
    Column("cpu_us", "CPU us/cycle", ".0f"),
    Column("ratio", "x baseline", ".2f"),
    Column("requests", "requests/cycle", ".2f"),
    Column("server_cmds", "server cmds/cycle", ".2f"),
    Column("server_cpu_us", "server CPU us/cycle", ".1f"),
]
HEADLINE = "ops"
FIRST = "contender"

# Issue 28's goals.
GOALS = [
    Goal("seawall.Lock >= 1.0 x redis-py Lock cycles/s", "seawall.Lock", "ratio", ">=", 1.0),
    Goal(
        "seawall.aio.Lock >= 1.0 x redis.asyncio Lock cycles/s",
        "seawall.aio.Lock",
        "ratio",
        ">=",
        1.0,
    ),
    # A count (tests/test_lock_costs.py asserts it exactly); total_commands_processed also
    # counts the odd background PING of 2,000 cycles, hence the hundredth.
    Goal("seawall.Lock <= 6 server commands per cycle", "seawall.Lock", "server_cmds", "<=", 6.01),
    Goal(
        "seawall.aio.Lock <= 6 server commands per cycle",
        "seawall.aio.Lock",
        "server_cmds",
        "<=",
        6.01,
    ),
    Goal(
        "seawall.Lock <= 2 requests per cycle, fence included",
        "seawall.Lock",
        "requests",
        "<=",
        2.0,
    ),
    Goal("seawall.aio.Lock <= 2 requests per cycle", "seawall.aio.Lock", "requests", "<=", 2.0),
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


@dataclass(frozen=True)
class Counts:
    requests: float  # round trips per cycle
    server_cmds: float  # commands the server ran per cycle, Lua-internal ones included
    server_cpu_us: float  # server CPU time per cycle
    breakdown: str  # calls per cycle of each command


class Bench:
    def __init__(self, url: str, runner: asyncio.Runner) -> None:
        self.runner = runner
        self.client = redis.Redis.from_url(url)
        self.aclient = redis.asyncio.Redis.from_url(url)
        self.admin = redis.Redis.from_url(url)  # INFO goes through its own connection
        self.run_id = unique_name("uncontended")
        self.cycles: dict[str, Any] = {}
        for contender in CONTENDERS:
            name = key_name(self.run_id, contender.name)
            if contender.make_sync is not None:
                self.cycles[contender.name] = contender.make_sync(self.client, name)
            else:
                assert contender.make_async is not None
                self.cycles[contender.name] = contender.make_async(self.aclient, name)

    def run(
        self, contender: Contender, count: int | None, seconds: float = 0.0
    ) -> tuple[float, float]:
        """(cycles per second, CPU microseconds per cycle) of one round.

        CPU time is this process's, all threads included (a renewer thread counts).
        """
        cycle = self.cycles[contender.name]
        cpu = time.process_time()
        if contender.make_sync is not None:
            done, elapsed = run_sync(cycle, count, seconds)
        else:
            done, elapsed = self.runner.run(run_async(cycle, count, seconds))
        return done / elapsed, (time.process_time() - cpu) * 1e6 / done

    def count(self, contender: Contender) -> Counts:
        """Requests and server work per cycle, over COUNT_CYCLES cycles (not timed)."""
        calls_before = command_calls(self.admin)
        processed_before = server_commands(self.admin)
        cpu_before = server_cpu(self.admin)
        with counting_requests() as counter:
            self.run(contender, COUNT_CYCLES)
        cpu_after = server_cpu(self.admin)
        processed_after = server_commands(self.admin)
        calls_after = command_calls(self.admin)
        # Of our own INFO calls, the last reading counts two (stats, then cpu).
        server_cmds = (processed_after - processed_before - 2) / COUNT_CYCLES
        breakdown = {
            name: (calls - calls_before.get(name, 0)) / COUNT_CYCLES
            for name, calls in calls_after.items()
            if name != "info" and calls != calls_before.get(name, 0)
        }
        return Counts(
            requests=counter.requests / COUNT_CYCLES,
            server_cmds=server_cmds,
            server_cpu_us=(cpu_after - cpu_before) * 1e6 / COUNT_CYCLES,
            breakdown=", ".join(
                f"{n} {v:g}" for n, v in sorted(breakdown.items(), key=lambda i: -i[1])
            ),
        )

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
            print(f"lock_uncontended: {machine_note()}; {server_note(bench.admin)}")
            print(
                f"{passes} passes x {len(CONTENDERS)} contenders x {seconds:g} s rounds, "
                f"ttl {TTL:g} s\n"
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
            "requests": counts[contender.name].requests,
            "server_cmds": counts[contender.name].server_cmds,
        }
    print()
    print(format_table(COLUMNS, table, first=FIRST))
    print(
        "\nx baseline: median over passes of cycles/s divided by the baseline's in the same "
        "pass\n(sync contenders: redis-py Lock; async ones: redis.asyncio Lock). CPU: this "
        "process's,\nall threads. requests: round trips counted in redis-py. server cmds: "
        "commands the server\nran, Lua-internal ones included; per cycle:"
    )
    for contender in CONTENDERS:
        print(f"  {contender.name}: {counts[contender.name].breakdown}")
    print("\nGoals:\n" + format_goals(GOALS, table))
    write_json(args.json, "lock_uncontended", table, {"passes": passes, "seconds": seconds})


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--round-seconds", type=float, default=1.0, help="length of a round")
    parser.add_argument("--passes", type=int, default=9, help="rounds per contender")


if __name__ == "__main__":
    main()
