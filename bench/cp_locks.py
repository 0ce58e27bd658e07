"""Redis, etcd and ZooKeeper locks side by side: acquire+release cycles per second with
no contention, and hand-over latency from a release to a waiter in another process.

    PYTHONPATH=src .venv/bin/python bench/cp_locks.py [--quick] [--count 200] [--json PATH]

Each backend runs on its own private server on this machine (seawall.server(), the
launcher's etcd and ZooKeeper: the Debian packages etcd-server and zookeeper), so the
figures compare the protocols and clients, not networks. Hand-over as in
bench/lock_handover.py: the holder sleeps 2-22 ms, notes t0 and releases; the waiter,
blocked in acquire() in another process, notes t1 when it holds; latency = t1 - t0
(CLOCK_MONOTONIC is one clock for the whole machine). Backends take turns in batches.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import random
import time
from collections.abc import Iterator
from multiprocessing.connection import Connection
from typing import Any

import redis
from _harness import (
    Column,
    Goal,
    Table,
    format_goals,
    format_table,
    machine_note,
    parse_args,
    percentile,
    unique_name,
    write_json,
)

import seawall
import seawall.etcd
import seawall.zookeeper

BACKENDS = ("seawall.Lock (Redis)", "seawall.etcd.Lock", "seawall.zookeeper.Lock")
DELAY_MIN, DELAY_SPAN = 0.002, 0.020
WARMUP = 5
BATCH = 20

COLUMNS = [
    Column("cycles", "acquire+release /s", ",.0f"),
    Column("p50", "hand-over p50 ms", ".2f"),
    Column("p90", "p90 ms", ".2f"),
    Column("p99", "p99 ms", ".2f"),
    Column("max", "max ms", ".2f"),
]
HEADLINE = "p50"
FIRST = "backend"
GOALS = [Goal("etcd hand-over p50 <= 5 ms", "seawall.etcd.Lock", "p50", "<=", 5.0)]


def make_lock(backend: str, address: str, name: str) -> Any:
    if backend == BACKENDS[0]:
        return seawall.Lock(redis.Redis.from_url(address), name, ttl=10.0)
    if backend == BACKENDS[1]:
        return seawall.etcd.Lock(address, name, ttl=10.0)
    return seawall.zookeeper.Lock(address, name, session_timeout=10.0)


@contextlib.contextmanager
def servers() -> Iterator[dict[str, str]]:
    from seawall.launcher._etcd import EtcdProcess
    from seawall.launcher._zookeeper import ZooKeeperProcess
    from seawall.zookeeper._session import close_all

    with seawall.server() as url, EtcdProcess() as etcd, ZooKeeperProcess() as zk:
        try:
            yield {BACKENDS[0]: url, BACKENDS[1]: etcd.endpoint, BACKENDS[2]: zk.hosts}
        finally:
            close_all(zk.hosts)  # before the server stops, or kazoo retries until exit


def cycles_per_second(lock: Any, seconds: float) -> float:
    for _ in range(WARMUP):
        lock.acquire()
        lock.release()
    done, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        lock.acquire()
        lock.release()
        done += 1
    return done / (time.perf_counter() - started)


def waiter_main(backend: str, address: str, name: str, conn: Connection) -> None:
    lock = make_lock(backend, address, name)
    conn.send("ready")
    while conn.recv() == "go":
        conn.send("trying")
        lock.acquire()
        acquired = time.monotonic_ns()
        lock.release()
        conn.send(acquired)


class Pair:
    def __init__(self, ctx: Any, backend: str, address: str, name: str) -> None:
        self.backend = backend
        self.lock = make_lock(backend, address, name)
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=waiter_main, args=(backend, address, name, child))
        self.process.start()
        child.close()
        self.latencies_ms: list[float] = []
        if self.conn.recv() != "ready":
            raise RuntimeError(f"waiter for {backend} did not start")

    def hand_over(self, rng: random.Random) -> float:
        self.lock.acquire()
        self.conn.send("go")
        if self.conn.recv() != "trying":
            raise RuntimeError(f"waiter for {self.backend} is out of step")
        time.sleep(DELAY_MIN + rng.random() * DELAY_SPAN)
        released = time.monotonic_ns()
        self.lock.release()
        acquired: int = self.conn.recv()
        return (acquired - released) / 1e6

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.send("stop")
        self.process.join(10)
        if self.process.is_alive():
            self.process.kill()


def measure(addresses: dict[str, str], count: int, seconds: float, seed: int) -> Table:
    rng = random.Random(seed)
    run = unique_name("cp").replace(":", "-")
    table: Table = {}
    for backend, address in addresses.items():
        rate = cycles_per_second(make_lock(backend, address, f"{run}-solo"), seconds)
        table[backend] = {"cycles": rate}
        print(f"  {backend}: {rate:,.0f} acquire+release /s")
    ctx = multiprocessing.get_context("spawn")
    pairs = [Pair(ctx, b, a, f"{run}-handover") for b, a in addresses.items()]
    try:
        for pair in pairs:
            for _ in range(WARMUP):
                pair.hand_over(rng)
        done = 0
        while done < count:
            batch = min(BATCH, count - done)
            for pair in pairs:
                pair.latencies_ms += [pair.hand_over(rng) for _ in range(batch)]
            done += batch
            print(
                f"  {done}/{count}: "
                + ", ".join(f"{p.backend} {percentile(p.latencies_ms, 50):.2f} ms" for p in pairs)
            )
    finally:
        for pair in pairs:
            pair.stop()
    for pair in pairs:
        values = pair.latencies_ms
        table[pair.backend].update(
            p50=percentile(values, 50),
            p90=percentile(values, 90),
            p99=percentile(values, 99),
            max=max(values),
        )
    return table


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], _arguments)
    count = 40 if args.quick else args.count
    seconds = 1.0 if args.quick else args.seconds
    seed = random.randrange(1 << 32) if args.seed is None else args.seed
    print(f"cp_locks: {machine_note()}")
    print(f"{seconds:g} s of cycles per backend, {count} hand-overs each (seed {seed})\n")
    with servers() as addresses:
        table = measure(addresses, count, seconds, seed)
    print()
    print(format_table(COLUMNS, table, first=FIRST))
    print("\nGoals:\n" + format_goals(GOALS, table))
    write_json(args.json, "cp_locks", table, {"count": count, "seconds": seconds, "seed": seed})


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--count", type=int, default=200, help="hand-overs per backend")
    parser.add_argument("--seconds", type=float, default=3.0, help="cycling time per backend")
    parser.add_argument("--seed", type=int, help="seed of the random holding times")


if __name__ == "__main__":
    main()
