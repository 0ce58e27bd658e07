"""Hand-over latency: from the holder calling release() to a waiter in another process holding.

The parent process is the holder; one waiter process per library waits in a blocking
acquire(). Each hand-over:

    holder: acquire; tell the waiter to go          waiter: "trying"; acquire() (blocks)
    holder: sleep 2-102 ms (uniform, random)
    holder: t0 = monotonic_ns(); release()          waiter: acquire returns; t1 = monotonic_ns()
                                                    waiter: release; send t1
    latency = t1 - t0

CLOCK_MONOTONIC is one clock for the whole machine on Linux, so t0 and t1 compare across
processes. The random sleep spreads the release over a whole 100 ms polling period, so a
polling lock (redis-py's sleep=0.1) is seen at every phase, as a real waiter would be.
Libraries take turns in batches, so a noisy moment hurts them alike.

    PYTHONPATH=src .venv/bin/python bench/lock_handover.py [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import random
import time
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnContext

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
    server_note,
    unique_name,
    write_json,
)
from _locks import FLOOR_LOCKS, SYNC_LOCKS, key_name, make_lock

import seawall

DELAY_MIN = 0.002  # the waiter's first attempt has surely failed by then
DELAY_SPAN = 0.100  # one redis-py polling period
WARMUP = 5  # hand-overs per library before recording (connections, scripts, subscriptions)
BATCH = 25  # hand-overs per library per turn

COLUMNS = [
    Column("n", "hand-overs", ".0f"),
    Column("p50", "p50 ms", ".2f"),
    Column("p90", "p90 ms", ".2f"),
    Column("p99", "p99 ms", ".2f"),
    Column("max", "max ms", ".2f"),
    Column("mean", "mean ms", ".2f"),
    Column("p50_ratio", "p50 / seawall", ".1f"),
    Column("p50_floor", "p50 / floor", ".2f"),
    Column("p99_floor", "p99 / floor", ".2f"),
    Column("p50_prl", "p50 / python-redis-lock", ".2f"),
]
# The rows the goals measure seawall against, in the same run (issue 28): ratios, so that a
# slower machine is held to the same goals.
FLOOR_ROW = "floor: SET NX + pub/sub"
PEER_ROW = "python-redis-lock"
HEADLINE = "p50"
FIRST = "library"

GOALS = [
    Goal("seawall.Lock hand-over p50 <= python-redis-lock's", "seawall.Lock", "p50_prl", "<=", 1.0),
    Goal("seawall.Lock hand-over p50 <= 1.1 x the floor's", "seawall.Lock", "p50_floor", "<=", 1.1),
    Goal("seawall.Lock hand-over p99 <= 2 x the floor's", "seawall.Lock", "p99_floor", "<=", 2.0),
]


def waiter_main(url: str, library: str, name: str, conn: Connection) -> None:
    """Child process: on each "go", acquire (blocking), note when, release, report."""
    client = redis.Redis.from_url(url)
    lock = make_lock(library, client, name)
    client.ping()
    conn.send("ready")
    while conn.recv() == "go":
        conn.send("trying")
        lock.acquire()
        acquired = time.monotonic_ns()
        lock.release()
        conn.send(acquired)
    client.close()


class Pair:
    """The holder's lock for one library and the pipe to that library's waiter process."""

    def __init__(
        self, ctx: SpawnContext, url: str, client: redis.Redis, library: str, name: str
    ) -> None:
        self.library = library
        self.lock = make_lock(library, client, name)
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(
            target=waiter_main, args=(url, library, name, child), name=f"waiter {library}"
        )
        self.process.start()
        child.close()
        self.latencies_ms: list[float] = []

    def ready(self) -> None:
        if self.conn.recv() != "ready":
            raise RuntimeError(f"waiter for {self.library} did not start")

    def hand_over(self, rng: random.Random) -> float:
        """One hand-over; its latency in milliseconds."""
        self.lock.acquire()
        self.conn.send("go")
        if self.conn.recv() != "trying":
            raise RuntimeError(f"waiter for {self.library} is out of step")
        time.sleep(DELAY_MIN + rng.random() * DELAY_SPAN)
        released = time.monotonic_ns()
        self.lock.release()
        acquired: int = self.conn.recv()
        return (acquired - released) / 1e6

    def stop(self) -> None:
        with contextlib.suppress(OSError):  # the waiter may be gone already
            self.conn.send("stop")
        self.process.join(10)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()


def measure(url: str, count: int, libraries: list[str], seed: int) -> dict[str, list[float]]:
    ctx = multiprocessing.get_context("spawn")
    client = redis.Redis.from_url(url)
    run_id = unique_name("handover")
    rng = random.Random(seed)
    pairs = [Pair(ctx, url, client, lib, key_name(run_id, lib)) for lib in libraries]
    try:
        for pair in pairs:
            pair.ready()
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
                + ", ".join(
                    f"{p.library} p50 {percentile(p.latencies_ms, 50):.2f} ms" for p in pairs
                )
            )
    finally:
        for pair in pairs:
            pair.stop()
        for key in client.scan_iter(match=f"*{run_id}*", count=1000):
            client.delete(key)
        client.close()
    return {pair.library: pair.latencies_ms for pair in pairs}


def summarize(latencies: dict[str, list[float]]) -> Table:
    table: Table = {}
    for library, values in latencies.items():
        table[library] = {
            "n": len(values),
            "p50": percentile(values, 50),
            "p90": percentile(values, 90),
            "p99": percentile(values, 99),
            "max": max(values),
            "mean": sum(values) / len(values),
        }
    for row in table.values():
        if "seawall.Lock" in table:
            row["p50_ratio"] = row["p50"] / table["seawall.Lock"]["p50"]
        if FLOOR_ROW in table:
            row["p50_floor"] = row["p50"] / table[FLOOR_ROW]["p50"]
            row["p99_floor"] = row["p99"] / table[FLOOR_ROW]["p99"]
        if PEER_ROW in table:
            row["p50_prl"] = row["p50"] / table[PEER_ROW]["p50"]
    return table


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], _arguments)
    count = 60 if args.quick else args.count
    seed = random.randrange(1 << 32) if args.seed is None else args.seed
    with seawall.server() as url:
        admin = redis.Redis.from_url(url)
        print(f"lock_handover: {machine_note()}; {server_note(admin)}")
        admin.close()
        print(
            f"{count} hand-overs per library (after {WARMUP} unrecorded), in turns of "
            f"{BATCH}; holder sleeps {DELAY_MIN * 1e3:g}-{(DELAY_MIN + DELAY_SPAN) * 1e3:g} "
            f"ms before releasing (seed {seed})\n"
        )
        latencies = measure(url, count, args.libraries, seed)
    table = summarize(latencies)
    print()
    print(format_table(COLUMNS, table, first=FIRST))
    print("\nGoals:\n" + format_goals(GOALS, table))
    write_json(args.json, "lock_handover", table, {"count": count, "seed": seed})


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--count", type=int, default=300, help="hand-overs per library")
    parser.add_argument(
        "--seed", type=int, help="seed of the random holding times (default: a fresh one)"
    )
    parser.add_argument(
        "--libraries",
        nargs="+",
        default=[*SYNC_LOCKS, *FLOOR_LOCKS],
        choices=[*SYNC_LOCKS, *FLOOR_LOCKS],
        metavar="LIBRARY",
        help=f"which locks to measure (default: all of {', '.join(SYNC_LOCKS)})",
    )


if __name__ == "__main__":
    main()
