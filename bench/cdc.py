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

import seawall
from seawall._cache_codec import cache_keys
from seawall._l1 import MISSING

ROWS = 20_000
SENTINEL = 0  # its invalidation marks "the follower has everything up to here"


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
    try:
        from seawall.launcher._mariadb import MariaDBProcess  # type: ignore[import-not-found]
    except ImportError:
        raise SystemExit(
            "bench/cdc.py --source mariadb needs seawall.launcher._mariadb (the MariaDB "
            "source's branch)"
        ) from None
    import pymysql

    with MariaDBProcess() as server:

        def connect() -> Any:
            return pymysql.connect(
                host="127.0.0.1", port=server.port, user="root", database="test",
                autocommit=True,
            )  # fmt: skip

        yield Database("mariadb", server.url("test"), connect)


SOURCES = {"postgresql": postgresql, "mariadb": mariadb}


def _reader(redis_url: str, pipe: Any, count: int) -> None:
    """Another process: every row in L1; reports each row's commit-to-gone delay."""
    client = redis.Redis.from_url(redis_url)
    cache = seawall.Cache(client, "items", l1_ttl=600.0)
    for i in range(1, count + 1):
        cache.get_or_load(i, lambda: "old")
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
    }


def run(kind: str, quick: bool, rate: int, follow_rate: int) -> None:
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
                lag = measure_lag(db, redis_url, rate, 3.0 if quick else 15.0)
                seconds = 3.0 if quick else 15.0
                paced = measure_rate(db, client, seconds, 100, follow_rate, follower.pid)
                flow = measure_rate(db, client, seconds, 100, None, follower.pid)
            finally:
                follower.terminate()
                follower.wait(10)
        os.unlink(log.name)
        print(f"\n{kind}: lag at {lag['rate']:,.0f} row changes/s (one row per transaction)")
        print(f"  p50 {lag['p50_ms']:.2f} ms  p99 {lag['p99_ms']:.2f} ms  max "
              f"{lag['max_ms']:.2f} ms  missing {lag['missing']}"
              f"   goals: p50 <= 10 ms, p99 <= 50 ms")  # fmt: skip
        for title, figures in (("paced", paced), ("as fast as the writer goes", flow)):
            print(f"{kind}: sustained follow, 100 rows per transaction, {title}")
            print(f"  written {figures['write_rate']:,.0f}/s  followed "
                  f"{figures['follow_rate']:,.0f}/s  lag at the end "
                  f"{figures['lag_at_end_s']:.3f} s   goal: >= 10,000/s, lag bounded")  # fmt: skip
            follower_cpu, redis_cpu = figures["follower_cpu_s"], figures["redis_cpu_s"]
            cpu = f"follower {follower_cpu:.2f} s, redis {redis_cpu:.2f} s"
            print(f"  CPU over {figures['elapsed_s']:.1f} s: {cpu}")
        client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", choices=["postgresql", "mariadb", "both"], default="postgresql")
    parser.add_argument("--quick", action="store_true", help="3 s per measurement (else 15 s)")
    parser.add_argument("--rate", type=int, default=1000, help="row changes/s for the lag test")
    parser.add_argument(
        "--follow-rate", type=int, default=20_000, help="row changes/s of the paced rate test"
    )
    args = parser.parse_args()
    for kind in ["postgresql", "mariadb"] if args.source == "both" else [args.source]:
        run(kind, args.quick, args.rate, args.follow_rate)


if __name__ == "__main__":
    main()
