"""Redlock: uncontended acquire+release cycles per second over independent masters.

seawall.Redlock over 3 and 5 masters against pottery's Redlock over 3 masters (and 1),
plus seawall.aio.Redlock over 3 for reference. One process, one lock per contender,
nobody else wanting it: the cost of the algorithm's round trips and of running them
concurrently. The contenders take turns in rounds (A, B, C, ... then the reverse order),
so a noisy neighbour slows all of them alike; each figure is the median of its rounds and
each ratio the median of per-pass ratios to pottery over 3 masters.

    PYTHONPATH=src .venv/bin/python bench/redlock.py [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pottery
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
    server_note,
    unique_name,
    write_json,
)

import seawall
import seawall.aio
from seawall.launcher import start_masters, stop_all

TTL = 10.0
BATCH = 10  # cycles between clock reads
WARMUP_CYCLES = 100
COUNT_CYCLES = 300
BASELINE = "pottery Redlock, 3 masters"


@dataclass(frozen=True)
class Contender:
    name: str
    masters: int
    make_sync: Callable[[list[redis.Redis], str], Callable[[], None]] | None = None
    make_async: Callable[[list[redis.asyncio.Redis], str], Callable[[], Awaitable[None]]] | None = (
        None
    )


def _seawall(clients: list[redis.Redis], name: str) -> Callable[[], None]:
    # renew=True is the default: the renewer's bookkeeping is part of the cost.
    lock = seawall.Redlock(clients, name, ttl=TTL)

    def cycle() -> None:
        lock.acquire()
        lock.release()

    return cycle


def _seawall_aio(clients: list[redis.asyncio.Redis], name: str) -> Callable[[], Awaitable[None]]:
    lock = seawall.aio.Redlock(clients, name, ttl=TTL)

    async def cycle() -> None:
        await lock.acquire()
        await lock.release()

    return cycle


def _pottery(clients: list[redis.Redis], name: str) -> Callable[[], None]:
    lock = pottery.Redlock(key=name, masters=set(clients), auto_release_time=TTL)

    def cycle() -> None:
        lock.acquire()
        lock.release()

    return cycle


CONTENDERS = [
    Contender("seawall.Redlock, 3 masters", 3, make_sync=_seawall),
    Contender("seawall.Redlock, 5 masters", 5, make_sync=_seawall),
    Contender("seawall.aio.Redlock, 3 masters", 3, make_async=_seawall_aio),
    Contender(BASELINE, 3, make_sync=_pottery),
    Contender("pottery Redlock, 1 master", 1, make_sync=_pottery),
]

COLUMNS = [
    Column("ops", "cycles/s", ",.0f"),
    Column("ops_min", "min", ",.0f"),
    Column("ops_max", "max", ",.0f"),
    Column("us", "us/cycle", ".0f"),
    Column("cpu_us", "CPU us/cycle", ".0f"),
    Column("ratio", "x pottery (3)", ".2f"),
    Column("requests", "requests/cycle", ".2f"),
]
HEADLINE = "ops"
FIRST = "contender"

GOALS = [
    Goal(
        "seawall.Redlock over 3 masters >= 2 x pottery over 3 masters",
        "seawall.Redlock, 3 masters",
        "ratio",
        ">=",
        2.0,
    ),
    Goal(
        "seawall.Redlock over 5 masters >= 1.5 x pottery over 3 masters",
        "seawall.Redlock, 5 masters",
        "ratio",
        ">=",
        1.5,
    ),
]


class Bench:
    def __init__(self, urls: list[str], runner: asyncio.Runner) -> None:
        self.runner = runner
        self.clients = [redis.Redis.from_url(url) for url in urls]
        self.aclients = [redis.asyncio.Redis.from_url(url) for url in urls]
        self.run_id = unique_name("redlock")
        self.cycles: dict[str, Any] = {}
        for contender in CONTENDERS:
            name = f"{self.run_id}:{contender.name}"
            if contender.make_sync is not None:
                self.cycles[contender.name] = contender.make_sync(
                    self.clients[: contender.masters], name
                )
            else:
                assert contender.make_async is not None
                self.cycles[contender.name] = contender.make_async(
                    self.aclients[: contender.masters], name
                )

    def run(
        self, contender: Contender, count: int | None, seconds: float = 0.0
    ) -> tuple[float, float]:
        """(cycles per second, CPU microseconds per cycle) of one round."""
        cycle = self.cycles[contender.name]
        cpu = time.process_time()
        if contender.make_sync is not None:
            done, elapsed = _run_sync(cycle, count, seconds)
        else:
            done, elapsed = self.runner.run(_run_async(cycle, count, seconds))
        return done / elapsed, (time.process_time() - cpu) * 1e6 / done

    def requests(self, contender: Contender) -> float:
        with counting_requests() as counter:
            self.run(contender, COUNT_CYCLES)
        return counter.requests / COUNT_CYCLES

    def cleanup(self) -> None:
        for client in self.clients:
            for key in client.scan_iter(match=f"*{self.run_id}*", count=1000):
                client.delete(key)
            client.close()
        for aclient in self.aclients:
            self.runner.run(aclient.aclose())


def _run_sync(cycle: Callable[[], None], count: int | None, seconds: float) -> tuple[int, float]:
    done = 0
    start = time.perf_counter()
    while True:
        for _ in range(BATCH if count is None else count):
            cycle()
        done += BATCH if count is None else count
        now = time.perf_counter()
        if count is not None or now - start >= seconds:
            return done, now - start


async def _run_async(
    cycle: Callable[[], Awaitable[None]], count: int | None, seconds: float
) -> tuple[int, float]:
    done = 0
    start = time.perf_counter()
    while True:
        for _ in range(BATCH if count is None else count):
            await cycle()
        done += BATCH if count is None else count
        now = time.perf_counter()
        if count is not None or now - start >= seconds:
            return done, now - start


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], _arguments)
    seconds = 0.5 if args.quick else args.round_seconds
    passes = 3 if args.quick else args.passes
    masters = start_masters(5)
    try:
        with asyncio.Runner() as runner:
            bench = Bench([m.url for m in masters], runner)
            try:
                print(f"redlock: {machine_note()}; 5 masters, {server_note(bench.clients[0])}")
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
                requests = {c.name: bench.requests(c) for c in CONTENDERS}
            finally:
                bench.cleanup()
    finally:
        stop_all(masters)
    table: Table = {}
    for contender in CONTENDERS:
        table[contender.name] = {
            **round_figures(rounds[contender.name], rounds[BASELINE], cpu[contender.name]),
            "requests": requests[contender.name],
        }
    print()
    print(format_table(COLUMNS, table, first=FIRST))
    print(
        "\nx pottery (3): median over passes of cycles/s divided by pottery's over 3 masters "
        "in the same pass.\nCPU: this process's, all threads. requests: round trips counted "
        "in redis-py (one per master\nper round: seawall sends each round to every master at "
        "once)."
    )
    print("\nGoals:\n" + format_goals(GOALS, table))
    write_json(args.json, "redlock", table, {"passes": passes, "seconds": seconds})


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--round-seconds", type=float, default=1.0, help="length of a round")
    parser.add_argument("--passes", type=int, default=7, help="rounds per contender")


if __name__ == "__main__":
    main()
