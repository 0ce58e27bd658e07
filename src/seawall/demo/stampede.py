"""Scenario: a hot key expires while 4 processes x 50 requesters want it (a stampede).

The value lives in a real database: a SQLite file, or the PostgreSQL (any SQLAlchemy URL)
that DATABASE_URL names; each query takes QUERY_SECONDS (a slow query under load). Naive
cache-aside (GET; on a miss query the database and SET) sends every requester that misses
to the database at once; seawall.Cache elects one loader across all processes and wakes
the others when the value lands.
"""

from __future__ import annotations

import os
import secrets
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
    from seawall.demo._context import DemoContext

Method = Literal["naive", "seawall"]

PROCESSES = 4
REQUESTERS = 50  # threads per process
QUERY_SECONDS = 0.05
START_DELAY = 0.5  # lets every process build its threads before the key is wanted
_ROUND_TIMEOUT = 60.0
DATABASE_URL_ENV = "DATABASE_URL"
POOL_SIZE = 5  # database connections per process when DATABASE_URL is set

# Where the users table lives: ("sqlite", file path, table) or ("url", SQLAlchemy URL, table).
Database = tuple[str, str, str]


def make_database(folder: str) -> Database:
    """A users table with one row: in a SQLite file, or on the server DATABASE_URL names
    (under a table name of its own, dropped afterwards by `drop_database`)."""
    url = os.environ.get(DATABASE_URL_ENV)
    db: Database = (
        ("url", url, f"seawall_demo_users_{secrets.token_hex(4)}")
        if url
        else ("sqlite", str(Path(folder) / "users.sqlite3"), "users")
    )
    _execute(db, f"CREATE TABLE {db[2]} (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
    _execute(db, f"INSERT INTO {db[2]} VALUES (1, 'Ada Lovelace')")
    return db


def drop_database(db: Database) -> None:
    if db[0] == "url":
        _execute(db, f"DROP TABLE {db[2]}")


def _execute(db: Database, statement: str) -> Any:
    kind, where, _ = db
    if kind == "sqlite":
        conn = sqlite3.connect(where, timeout=30, isolation_level=None)
        try:
            return conn.execute(statement).fetchone()
        finally:
            conn.close()
    engine = _engine(where)
    from sqlalchemy import text

    with engine.begin() as conn:
        result = conn.execute(text(statement))
        return result.fetchone() if result.returns_rows else None


_engines: dict[str, Any] = {}
_engines_lock = threading.Lock()


def _engine(url: str) -> Any:
    """The process's one engine (one pool) for `url`; requesters start together, hence the
    lock. A few connections per process, as an application's pool would have: 200 at once
    would exceed the server's connection limit."""
    try:
        from sqlalchemy import create_engine
    except ImportError:
        raise SystemExit(
            f"{DATABASE_URL_ENV} is set ({url!r}), which needs SQLAlchemy and a driver: "
            "pip install 'seawall[postgresql]' (or unset it to use SQLite)"
        ) from None
    with _engines_lock:
        if url not in _engines:
            _engines[url] = create_engine(url, pool_size=POOL_SIZE, max_overflow=0, pool_timeout=60)
        return _engines[url]


def request(
    url: str, method: Method, db: Database, key: str, counter: str, requesters: int, start: float
) -> tuple[list[float], list[str]]:
    """Worker task: `requesters` threads read `key` at monotonic time `start`; their
    latencies, and the errors of those that failed."""
    r = client(url)
    cache = seawall.Cache(r, key, ttl=60.0, l1_size=0)

    def query() -> Any:
        r.incr(counter)  # the demo's own tally of database queries
        row = _execute(db, f"SELECT name FROM {db[2]} WHERE id = 1")
        time.sleep(QUERY_SECONDS)
        return row[0]

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
    failures: list[str] = []

    def requester() -> None:
        time.sleep(max(0.0, start - time.monotonic()))
        began = time.monotonic()
        try:
            read()
        except Exception as exc:  # shown in the table: a request the database refused
            failures.append(repr(exc))
            return
        latencies.append(time.monotonic() - began)

    threads = [threading.Thread(target=requester) for _ in range(requesters)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies, failures


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
            f"the value comes from {_where()} whose query takes "
            f"{QUERY_SECONDS * 1000:.0f} ms.",
        ],
    )
    with tempfile.TemporaryDirectory(prefix="seawall-demo-") as folder:
        db = make_database(folder)
        try:
            _rounds(ctx, table, processes, db)
        finally:
            drop_database(db)
    table.notes = [
        "seawall.Cache: one script reads the value or takes the key's load lease; the "
        "lease holder queries, the others are woken by a publish when the value lands "
        "(no polling). A delete during the load voids the lease, so a slow loader cannot "
        "write back an older value.",
    ]
    return table


def _rounds(ctx: DemoContext, table: Table, processes: int, db: Database) -> None:
    for method, label in (("naive", "GET / query / SET"), ("seawall", "seawall.Cache")):
        ctx.progress(f"stampede: {label}")
        key = ctx.name(f"stampede:{method}")
        counter = ctx.name(f"stampede-queries:{method}")
        start = time.monotonic() + START_DELAY
        args = (ctx.url, method, db, key, counter, REQUESTERS, start)
        results: list[tuple[list[float], list[str]]] = ctx.workers.run_all(
            request, [args] * processes, timeout=_ROUND_TIMEOUT
        )
        latencies = sorted(x for found, _ in results for x in found)
        failures = [error for _, errors in results for error in errors]
        queries = int(ctx.client.get(counter) or 0)
        table.add(
            label,
            str(len(latencies)),
            Cell(str(queries), "good" if queries == 1 else "bad"),
            _ms(_percentile(latencies, 0.50)),
            _ms(_percentile(latencies, 0.99)),
            _ms(latencies[-1]),
            _notes(method, queries)
            + (f"; {len(failures)} requests failed: {failures[0]}" if failures else ""),
        )


def _where() -> str:
    url = os.environ.get(DATABASE_URL_ENV)
    if not url:
        return "a SQLite database"
    return f"the database in {DATABASE_URL_ENV} ({url.split('://', 1)[0]})"


def _notes(method: str, queries: int) -> str:
    if method == "naive":
        return f"every requester that missed before the first SET queried: {queries} queries"
    return "one query for all processes; the others waited for it and were woken"


def _percentile(values: list[float], fraction: float) -> float:
    return values[min(len(values) - 1, int(fraction * len(values)))]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"
