"""`seawall follow`: invalidation lag and sustained follow rate, per change-log source.

Lag: a reader process holds every row in its Cache's L1; a writer commits one-row updates
at a steady --rate (default 1,000/s) and tells the reader each commit's wall-clock time;
the reader watches its L1 and records when each row's old value is gone (commit -> the
follower read the log, voided Redis, published; the reader's listener dropped the copy).
Rate: the writer commits --batch-row updates per transaction as fast as it can for
--seconds; the figure is row changes over the time from the first commit until the last
transaction's sentinel row is invalidated (so "lag bounded" is part of it).

The follower is `seawall follow` in its own process, as deployed. Private servers only.

    PYTHONPATH=src .venv/bin/python bench/cdc.py [--source postgresql|mariadb|both] [--quick]
        [--json PATH]

The servers are private ones started for the run by seawall.launcher, as the tests start
theirs (the postgresql and mariadb-server packages; the cdc-postgresql and cdc-mysql
extras). Both sources run one after the other in one run and are printed side by side.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
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
    write_json,
)

import seawall
from seawall.cache._codec import cache_keys
from seawall.cache._l1 import MISSING

ROWS = 20_000
SENTINEL = 0  # its invalidation marks "the follower has everything up to here"

HEADLINE = "p99_ms"
FIRST = "source"
COLUMNS = [
    Column("rate", "lag test: changes/s (1 per tx)", ",.0f"),
    Column("p50_ms", "lag p50 ms", ".2f"),
    Column("p99_ms", "lag p99 ms", ".2f"),
    Column("max_ms", "lag max ms", ".2f"),
    Column("missing", "lost", ".0f"),
    Column("paced_follow", "paced: followed/s", ",.0f"),
    Column("paced_behind_ms", "paced: behind at the end ms", ",.0f"),
    Column("unpaced_write", "unpaced: written/s (100 per tx)", ",.0f"),
    Column("unpaced_follow", "unpaced: followed/s", ",.0f"),
    Column("follower_us", "follower CPU us/change", ".1f"),
    Column("redis_us", "Redis CPU us/change", ".1f"),
]
GOALS = [
    goal
    for source in ("postgresql", "mariadb")
    for goal in (
        Goal(f"{source}: lag p50 <= 10 ms", source, "p50_ms", "<=", 10.0),
        Goal(f"{source}: lag p99 <= 50 ms", source, "p99_ms", "<=", 50.0),
        Goal(f"{source}: nothing lost", source, "missing", "==", 0.0),
        Goal(f"{source}: paced follow >= 10,000 changes/s", source, "paced_follow", ">=", 1e4),
    )
]


@dataclass
class Database:
    kind: str
    url: str
    connect: Callable[[], Any]  # a DB-API connection, autocommit


@contextmanager
def postgresql() -> Iterator[Database]:
    import psycopg2

    from seawall.launcher._postgres import PostgresProcess

    with PostgresProcess() as server:

        def connect() -> Any:
            conn = psycopg2.connect(server.dsn())
            conn.autocommit = True
            return conn

        yield Database("postgresql", server.url(), connect)


@contextmanager
def mariadb() -> Iterator[Database]:
    import pymysql

    from seawall.launcher._mariadb import MariaDBProcess

    with MariaDBProcess() as server:

        def connect(database: str | None = "bench") -> Any:
            return pymysql.connect(
                host=server.host, port=server.port, user="root", database=database,
                autocommit=True,
            )  # fmt: skip

        conn = connect(None)  # the private server has no database of its own yet
        conn.cursor().execute("CREATE DATABASE bench")
        conn.close()
        yield Database("mariadb", server.url("bench"), connect)


SOURCES = {"postgresql": postgresql, "mariadb": mariadb}


def _reader(redis_url: str, pipe: Any, count: int) -> None:
    """Another process: every row in L1; reports each row's commit-to-gone delay."""
    client = redis.Redis.from_url(redis_url)
    # An L1 as big as the rows read: a smaller one (the default 10,000) evicts rows before
    # their change arrives, and those read as gone at once (lag ~0 ms).
    cache = seawall.Cache(client, "items", l1_ttl=600.0, l1_size=count + 1)
    # The L1 keeps a read only once its invalidation listener is subscribed (before, a
    # change could be missed): reads made earlier are not kept, and would read as gone.
    assert cache._invalidator_here().wait_listening(30), "the listener never subscribed"
    for _ in range(3):
        missing = [i for i in range(1, count + 1) if cache.l1.get(str(i)) is MISSING]
        for i in missing:
            cache.get_or_load(i, lambda: "old")
    held = sum(cache.l1.get(str(i)) is not MISSING for i in range(1, count + 1))
    assert held == count, f"the L1 holds {held} of {count} rows"
    pipe.send("ready")
    pending: dict[str, float] = {}
    lags: list[float] = []
    done = False
    while not done or pending:
        while pipe.poll():
            item = pipe.recv()
            if item is None:
                done = True
            else:
                pending[str(item[0])] = item[1]
        now = time.time()
        for key in [k for k in pending if cache.l1.get(k) is MISSING]:
            lags.append(now - pending.pop(key))
        if done and pending and now - max(pending.values()) > 10:
            break  # lost: reported as missing
        time.sleep(0.0002)
    pipe.send((lags, len(pending)))


def _start_follower(db: Database, redis_url: str, log: Any) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "seawall", "follow", db.url, "--redis", redis_url,
            "--map", "items=items"]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while "streaming" not in open(log.name).read():  # noqa: SIM115
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the follower did not start:\n{open(log.name).read()}")  # noqa: SIM115
        time.sleep(0.05)
    return proc


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def measure_lag(db: Database, redis_url: str, rate: int, seconds: float) -> dict[str, float]:
    count = int(rate * seconds)
    ours, theirs = multiprocessing.get_context("spawn").Pipe()
    reader = multiprocessing.get_context("spawn").Process(
        target=_reader, args=(redis_url, theirs, count)
    )
    reader.start()
    assert ours.recv() == "ready"
    conn = db.connect()
    cursor = conn.cursor()
    start = time.perf_counter()
    for i in range(1, count + 1):
        target = start + i / rate
        delay = target - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        cursor.execute("UPDATE items SET v = v + 1 WHERE id = %s", (i,))
        ours.send((i, time.time()))
    ours.send(None)
    lags, missing = ours.recv()
    reader.join()
    conn.close()
    achieved = count / (time.perf_counter() - start)
    return {
        "rate": achieved,
        "p50_ms": _percentile(lags, 0.5) * 1000,
        "p99_ms": _percentile(lags, 0.99) * 1000,
        "max_ms": max(lags) * 1000 if lags else float("nan"),
        "missing": missing,
    }


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _redis_cpu(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def measure_rate(
    db: Database,
    client: redis.Redis,
    seconds: float,
    batch: int,
    pace: int | None,
    follower_pid: int,
) -> dict[str, float]:
    seawall.Cache(client, "items").set(SENTINEL, "old")
    cpu_follower, cpu_redis = _cpu_seconds(follower_pid), _redis_cpu(client)
    conn = db.connect()
    cursor = conn.cursor()
    changes = 0
    start = time.perf_counter()
    low = 1
    while time.perf_counter() - start < seconds:
        if pace is not None:
            delay = start + changes / pace - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
        cursor.execute(
            "UPDATE items SET v = v + 1 WHERE id BETWEEN %s AND %s", (low, low + batch - 1)
        )
        changes += batch
        low = low + batch if low + batch + batch <= ROWS else 1
    cursor.execute("UPDATE items SET v = v + 1 WHERE id = %s", (SENTINEL,))
    committed = time.perf_counter()
    sentinel = cache_keys("items", str(SENTINEL)).value
    while client.exists(sentinel):
        time.sleep(0.001)
        if time.perf_counter() - committed > 120:
            raise SystemExit("the follower did not catch up within 120 s")
    done = time.perf_counter()
    conn.close()
    return {
        "write_rate": changes / (committed - start),
        "follow_rate": (changes + 1) / (done - start),
        "lag_at_end_s": done - committed,
        "follower_cpu_s": _cpu_seconds(follower_pid) - cpu_follower,
        "redis_cpu_s": _redis_cpu(client) - cpu_redis,
        "elapsed_s": done - start,
        "changes": changes + 1,
    }


def run(kind: str, quick: bool, rate: int, follow_rate: int) -> dict[str, dict[str, float]]:
    with seawall.server() as redis_url, SOURCES[kind]() as db:
        conn = db.connect()
        cursor = conn.cursor()
        cursor.execute("CREATE TABLE items (id INT PRIMARY KEY, v INT NOT NULL)")
        values = ", ".join(f"({i}, 0)" for i in range(ROWS + 1))
        cursor.execute(f"INSERT INTO items VALUES {values}")
        conn.close()
        client = redis.Redis.from_url(redis_url)
        with tempfile.NamedTemporaryFile("wb", suffix=".log", delete=False) as log:
            follower = _start_follower(db, redis_url, log)
            try:
                seconds = 3.0 if quick else 15.0
                lag = measure_lag(db, redis_url, rate, seconds)
                paced = measure_rate(db, client, seconds, 100, follow_rate, follower.pid)
                flow = measure_rate(db, client, seconds, 100, None, follower.pid)
            finally:
                follower.terminate()
                follower.wait(10)
        os.unlink(log.name)
        client.close()
    return {"lag": lag, "paced": paced, "unpaced": flow}


def figures(result: dict[str, dict[str, float]]) -> dict[str, float]:
    """One source's row of the table."""
    lag, paced, unpaced = result["lag"], result["paced"], result["unpaced"]
    return {
        **{name: lag[name] for name in ("rate", "p50_ms", "p99_ms", "max_ms", "missing")},
        "paced_follow": paced["follow_rate"],
        "paced_behind_ms": paced["lag_at_end_s"] * 1000,
        "unpaced_write": unpaced["write_rate"],
        "unpaced_follow": unpaced["follow_rate"],
        "follower_us": unpaced["follower_cpu_s"] * 1e6 / unpaced["changes"],
        "redis_us": unpaced["redis_cpu_s"] * 1e6 / unpaced["changes"],
    }


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], _arguments)
    kinds = ["postgresql", "mariadb"] if args.source == "both" else [args.source]
    print(f"cdc: {machine_note()}; {'3' if args.quick else '15'} s per measurement")
    table: Table = {}
    for kind in kinds:  # one after the other: on 2 cores, at once would measure contention
        table[kind] = figures(run(kind, args.quick, args.rate, args.follow_rate))
        print(f"{kind}: done", flush=True)
    print()
    print(format_table(COLUMNS, table, first=FIRST))
    print("\nGoals:\n" + format_goals(GOALS, table))
    write_json(args.json, "cdc", table, {"rate": args.rate, "follow_rate": args.follow_rate})


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--source", choices=["postgresql", "mariadb", "both"], default="both")
    parser.add_argument("--rate", type=int, default=1000, help="row changes/s for the lag test")
    parser.add_argument(
        "--follow-rate", type=int, default=20_000, help="row changes/s of the paced rate test"
    )


if __name__ == "__main__":
    main()
