"""Scenario: rows change in the database while readers keep the cache full.

Readers read through seawall.Cache from a replica that applies every write REPLICA_LAG
seconds late (a second table, filled by a replicator thread: the lag of a real replica,
made visible). The writer updates each row on the primary and deletes its cache entry.

- Cache aside with a plain delete: readers that miss right after the delete load the old
  row from the replica and fill the cache with it; those entries stay stale for their ttl.
- `delete(key, again_after=...)`: the second delete, recorded in Redis, removes them.
- `seawall follow`: the writer does not touch the cache at all; the follower reads the
  database's change log and invalidates every changed row. This round needs DATABASE_URL
  to name a PostgreSQL (wal_level=logical) or MariaDB/MySQL (row binlog); otherwise the
  table says the one line that enables it.

Stale entries are counted after quiescence: every write applied on the replica, every
second delete due, the follower caught up.
"""

from __future__ import annotations

import os
import secrets
import tempfile
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import seawall
from seawall.demo._table import Cell, Column, Table
from seawall.demo.stampede import DATABASE_URL_ENV, Database, _execute

if TYPE_CHECKING:
    from seawall.demo._context import DemoContext

ROWS = 40
READERS = 4
REPLICA_LAG = 0.3
AGAIN_AFTER = REPLICA_LAG + 0.2


def run(ctx: DemoContext) -> Table:
    table = Table(
        title=f"Cache and database: {ROWS} rows updated while {READERS} readers keep reading",
        columns=[
            Column("invalidation"),
            Column("rows changed", ">"),
            Column("stale after", ">"),
            Column("notes", wrap=True),
        ],
        intro=[
            f"Readers load rows from a replica {REPLICA_LAG * 1000:.0f} ms behind the primary "
            f"({_where()}). Stale entries are counted once everything has settled.",
        ],
    )
    with tempfile.TemporaryDirectory(prefix="seawall-demo-") as folder:
        url = os.environ.get(DATABASE_URL_ENV)
        suffix = secrets.token_hex(4)
        db: Database = (
            ("url", url, f"seawall_demo_rows_{suffix}")
            if url
            else ("sqlite", os.path.join(folder, "rows.sqlite3"), "rows")
        )
        _execute(db, f"CREATE TABLE {db[2]} (id INTEGER PRIMARY KEY, name VARCHAR(40))")
        _execute(db, f"CREATE TABLE {db[2]}_replica (id INTEGER PRIMARY KEY, name VARCHAR(40))")
        try:
            for label, again, note in (
                (
                    "delete after COMMIT",
                    None,
                    "a reader that missed loads the old row from "
                    "the lagging replica after the delete: it stays until its ttl",
                ),
                (
                    f"delete(again_after={AGAIN_AFTER})",
                    AGAIN_AFTER,
                    "the second delete, "
                    "recorded in Redis before delete() returned, removes those fills",
                ),
            ):
                ctx.progress(f"consistency: {label}")
                stale = _lagging_round(ctx, db, label, again)
                table.add(label, str(ROWS), _count(stale), note)
            _follow_round(ctx, db, table)
        finally:
            if db[0] == "url":
                _execute(db, f"DROP TABLE {db[2]}")
                _execute(db, f"DROP TABLE {db[2]}_replica")
    table.notes = [
        "Which race each remedy closes, and what none can promise: docs/consistency.md.",
    ]
    return table


def _where() -> str:
    return "the database DATABASE_URL names" if os.environ.get(DATABASE_URL_ENV) else "SQLite"


def _count(stale: int) -> Cell:
    return Cell(str(stale), "bad" if stale else "good")


def _fill(db: Database, value: str) -> None:
    for suffix in ("", "_replica"):
        _execute(db, f"DELETE FROM {db[2]}{suffix}")
        rows = ", ".join(f"({i}, '{value}')" for i in range(1, ROWS + 1))
        _execute(db, f"INSERT INTO {db[2]}{suffix} VALUES {rows}")


def _read(db: Database, table: str, row: int) -> Any:
    found = _execute(db, f"SELECT name FROM {table} WHERE id = {int(row)}")
    return None if found is None else found[0]


def _readers(stop: threading.Event, read: Callable[[int], Any]) -> list[threading.Thread]:
    def loop(offset: int) -> None:
        while not stop.is_set():
            for row in range(1, ROWS + 1):
                read((row + offset) % ROWS + 1)
                if stop.is_set():
                    return

    threads = [threading.Thread(target=loop, args=(i * 7,), daemon=True) for i in range(READERS)]
    for thread in threads:
        thread.start()
    return threads


def _stale(ctx: DemoContext, namespace: str, db: Database) -> int:
    """Entries whose cached value differs from the primary's row (absent ones are fine)."""
    view = seawall.Cache(ctx.client, namespace, l1_size=0)
    stale = 0
    for row in range(1, ROWS + 1):
        cached = view.get(row)
        if cached is not None and cached != _read(db, db[2], row):
            stale += 1
    return stale


def _lagging_round(ctx: DemoContext, db: Database, label: str, again: float | None) -> int:
    namespace = ctx.name(f"consistency:{secrets.token_hex(3)}")
    _fill(db, "old")
    cache = seawall.Cache(ctx.client, namespace, ttl=60.0)
    replica = f"{db[2]}_replica"
    stop = threading.Event()
    readers = _readers(stop, lambda row: cache.get_or_load(row, lambda: _read(db, replica, row)))
    applied: list[threading.Timer] = []
    try:
        time.sleep(0.2)  # the cache is full of "old"
        for row in range(1, ROWS + 1):
            _execute(db, f"UPDATE {db[2]} SET name = 'new' WHERE id = {row}")
            cache.delete(row, again_after=again)
            timer = threading.Timer(
                REPLICA_LAG, _execute, (db, f"UPDATE {replica} SET name = 'new' WHERE id = {row}")
            )
            timer.start()
            applied.append(timer)
            time.sleep(0.005)
        for timer in applied:
            timer.join()
        time.sleep((again or 0.0) + 1.0)  # every second delete due and carried out
    finally:
        stop.set()
        for thread in readers:
            thread.join(10)
    return _stale(ctx, namespace, db)


def _follow_round(ctx: DemoContext, db: Database, table: Table) -> None:
    label = "seawall follow (no cache code in the writer)"
    url = os.environ.get(DATABASE_URL_ENV, "")
    source = _source_url(url)
    if source is None:
        table.add(
            label,
            "-",
            "-",
            "needs DATABASE_URL naming PostgreSQL with "
            "wal_level=logical, or MariaDB/MySQL with binlog_format=ROW; "
            "see docs/cdc.md",
        )
        return
    from seawall.cdc import Follower, SourceError, TableMap

    ctx.progress("consistency: seawall follow")
    namespace = ctx.name(f"consistency:{secrets.token_hex(3)}")
    _fill(db, "old")
    cache = seawall.Cache(ctx.client, namespace, ttl=60.0)
    cache.warm({row: "old" for row in range(1, ROWS + 1)})
    slot = f"seawall_demo_{secrets.token_hex(4)}"
    if source.startswith("postgresql://"):
        source += f"{'&' if '?' in source else '?'}slot={slot}&publication={slot}"
    # A TableMap, not "TABLE=NAMESPACE" text: the run's namespace contains ":".
    follower = Follower(source, ctx.client, [TableMap(None, db[2], namespace)], ttl=5.0)
    failure: list[BaseException] = []

    def follow() -> None:
        try:
            follower.run()
        except BaseException as exc:  # reported in the table
            failure.append(exc)

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 15.0
        while not follower.status().streaming and not failure and time.monotonic() < deadline:
            time.sleep(0.05)
        if failure or not follower.status().streaming:
            why = failure[0] if failure else "did not start streaming within 15 s"
            message = str(why) if isinstance(why, SourceError | str) else repr(why)
            table.add(label, "-", "-", f"not run: {message}")
            return
        for row in range(1, ROWS + 1):
            _execute(db, f"UPDATE {db[2]} SET name = 'new' WHERE id = {row}")
        deadline = time.monotonic() + 10.0
        while _stale(ctx, namespace, db) and time.monotonic() < deadline:
            time.sleep(0.05)
        table.add(
            label,
            str(ROWS),
            _count(_stale(ctx, namespace, db)),
            "the follower read every UPDATE from the change log and invalidated "
            "the row in Redis and in every process's L1",
        )
    finally:
        follower.stop()
        thread.join(10)
        if source.startswith("postgresql://"):
            _drop_slot(db, slot)


def _source_url(url: str) -> str | None:
    """The follower's URL for a SQLAlchemy URL (`postgresql+psycopg://` -> `postgresql://`)."""
    scheme, sep, rest = url.partition("://")
    base = scheme.split("+", 1)[0]
    if not sep or base not in ("postgresql", "postgres", "mysql", "mariadb"):
        return None
    return f"{base}://{rest}"


def _drop_slot(db: Database, slot: str) -> None:
    for statement in (
        f"SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
        f"WHERE slot_name = '{slot}'",
        f"DROP PUBLICATION IF EXISTS {slot}",
    ):
        try:
            _execute(db, statement)
        except Exception:  # the slot may still be held for a moment: it is dropped later
            time.sleep(0.5)
            _execute(db, statement)
