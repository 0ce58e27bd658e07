"""Scenario: a hot key expires while 4 processes x 50 requesters want it (a stampede).

The value lives in a real SQLite database; each query takes QUERY_SECONDS (a slow query
under load). Naive cache-aside (GET; on a miss query the database and SET) sends every
requester that misses to the database at once; seawall.Cache elects one loader across all
processes and wakes the others when the value lands.
"""

from __future__ import annotations

import sqlite3
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import seawall
from seawall.demo._table import Cell, Column, Table
from seawall.demo._workers import client

if TYPE_CHECKING:
    from seawall.demo import DemoContext

Method = Literal["naive", "seawall"]

PROCESSES = 4
REQUESTERS = 50  # threads per process
QUERY_SECONDS = 0.05
START_DELAY = 0.5  # lets every process build its threads before the key is wanted
_ROUND_TIMEOUT = 60.0


def make_database(path: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
    conn.execute("INSERT INTO users VALUES (1, 'Ada Lovelace')")
    conn.close()


def request(
    url: str, method: Method, db_path: str, key: str, counter: str, requesters: int, start: float
) -> list[float]:
    """Worker task: `requesters` threads read `key` at monotonic time `start`; latencies."""
    r = client(url)
    cache = seawall.Cache(r, key, ttl=60.0, l1_size=0)

    def query() -> Any:
        r.incr(counter)  # the demo's own tally of database queries
        conn = sqlite3.connect(db_path, timeout=30)
        try:
            row = conn.execute("SELECT name FROM users WHERE id = 1").fetchone()
            time.sleep(QUERY_SECONDS)
            return row[0]
        finally:
            conn.close()

    def naive() -> Any:
        found = r.get(key)
        if found is not None:
            return found.decode() if isinstance(found, bytes) else str(found)
        value = query()
        r.set(key, value, ex=60)
        return value

    def fetch() -> Any:
        return cache.get_or_load(1, query)

    read = naive if method == "naive" else fetch
    latencies: list[float] = []

    def requester() -> None:
        time.sleep(max(0.0, start - time.monotonic()))
        began = time.monotonic()
        read()
        latencies.append(time.monotonic() - began)

    threads = [threading.Thread(target=requester) for _ in range(requesters)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies


def run(ctx: DemoContext) -> Table:
    processes = min(PROCESSES, len(ctx.workers))
    table = Table(
        title=f"A cache stampede: {processes} processes x {REQUESTERS} requesters, one key",
        columns=[
            Column("cache"),
            Column("requests", ">"),
            Column("db queries", ">"),
            Column("p50", ">"),
            Column("p99", ">"),
            Column("max", ">"),
            Column("notes", wrap=True),
        ],
        intro=[
            f"The key has just expired. {processes * REQUESTERS} requests arrive at once; "
            f"the value comes from a SQLite database whose query takes "
            f"{QUERY_SECONDS * 1000:.0f} ms.",
        ],
    )
    with tempfile.TemporaryDirectory(prefix="seawall-demo-") as folder:
        db_path = Path(folder) / "users.sqlite3"
        make_database(db_path)
        for method, label in (("naive", "GET / query / SET"), ("seawall", "seawall.Cache")):
            ctx.progress(f"stampede: {label}")
            key = ctx.name(f"stampede:{method}")
            counter = ctx.name(f"stampede-queries:{method}")
            start = time.monotonic() + START_DELAY
            args = (ctx.url, method, str(db_path), key, counter, REQUESTERS, start)
            results: list[list[float]] = ctx.workers.run_all(
                request, [args] * processes, timeout=_ROUND_TIMEOUT
            )
            latencies = sorted(x for found in results for x in found)
            queries = int(ctx.client.get(counter) or 0)
            table.add(
                label,
                str(len(latencies)),
                Cell(str(queries), "good" if queries == 1 else "bad"),
                _ms(_percentile(latencies, 0.50)),
                _ms(_percentile(latencies, 0.99)),
                _ms(latencies[-1]),
                _notes(method, queries),
            )
    table.notes = [
        "seawall.Cache: one script reads the value or takes the key's load lease; the "
        "lease holder queries, the others are woken by a publish when the value lands "
        "(no polling). A delete during the load voids the lease, so a slow loader cannot "
        "write back an older value.",
    ]
    return table


def _notes(method: str, queries: int) -> str:
    if method == "naive":
        return f"every requester that missed before the first SET queried: {queries} queries"
    return "one query for all processes; the others waited for it and were woken"


def _percentile(values: list[float], fraction: float) -> float:
    return values[min(len(values) - 1, int(fraction * len(values)))]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"
