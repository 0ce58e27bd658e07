"""seawall.Cache under faults: a loading process killed, a reader paused past a delete."""

from __future__ import annotations

import os
import signal
import sqlite3
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cacheworkers import calls_key, db_connect, db_write, load_once, report, stale_reader
from conftest import SPAWN, Target
from forked import FORKSERVER
from waiting import wait_until

import seawall

# --- acceptance 2 and 10: the loading process is SIGKILLed mid-load ---------------------------


# A timing bound (a wait, a takeover, a share of turns) that failed beside the parallel
# workers on 2 cores: measured alone after the parallel part (`scripts/dev.py test`).
@pytest.mark.serial
def test_killed_loader_is_taken_over_within_the_lease(target: Target, world: str) -> None:
    lease = 1.0
    name = f"killed-{world}"
    r = target.sync()
    results = FORKSERVER.Queue()
    go_first, go_second = FORKSERVER.Event(), FORKSERVER.Event()
    common = (target.url, target.cluster, world, name, lease)
    first = FORKSERVER.Process(
        target=report, args=(results, 0, load_once, *common, 60.0, go_first)
    )  # its loader would take a minute: it is killed long before
    second = FORKSERVER.Process(
        target=report, args=(results, 1, load_once, *common, 0.2, go_second)
    )
    first.start()
    second.start()
    try:
        go_first.set()
        wait_until(lambda: r.get(calls_key(name)) == b"1", 15, "the first process loads")
        go_second.set()
        waiters = f"seawall:cache:{{{name}:victim}}:waiters"
        wait_until(lambda: r.exists(waiters) == 1, 15, "the second process queues")
        os.kill(first.pid, signal.SIGKILL)  # type: ignore[arg-type]
        killed_at = time.monotonic_ns()
        index, found, error = results.get(timeout=lease + 10)
        assert error is None and index == 1, error
        answer, finished_at = found
        assert answer == f"loaded-by-{name}-0.2"
        took = (finished_at - killed_at) / 1e9
        print(f"takeover {took:.3f} s after the kill (lease {lease} s)")
        assert took <= lease + 1.0, took
        assert int(r.get(calls_key(name))) == 2  # the killed load and the takeover
        assert seawall.Cache(r, name).get("victim") == answer
    finally:
        for proc in (first, second):
            proc.kill()
            proc.join(5)


# --- acceptance 3 and 10: stale set against a real database ------------------------------------


def databases() -> list[str]:
    # SQLite always; PostgreSQL too when DATABASE_URL names one.
    return ["sqlite", "postgresql"] if os.environ.get("DATABASE_URL") else ["sqlite"]


@pytest.fixture(params=databases())
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    schema = None
    if request.param == "sqlite":
        db = ("sqlite", str(tmp_path / "rows.sqlite3"))
        conn: Any = sqlite3.connect(db[1], isolation_level=None)
    else:
        # A schema of its own: parallel workers (and other runs on the same server) each
        # have their own cache_rows table.
        url, schema = os.environ["DATABASE_URL"], f"s_{uuid.uuid4().hex[:12]}"
        with db_connect(("postgresql", url)) as admin:
            admin.execute(f"CREATE SCHEMA {schema}")
        db = ("postgresql", f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}")
        conn = db_connect(db)
    conn.execute("CREATE TABLE cache_rows (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("INSERT INTO cache_rows VALUES (1, 'old')")
    conn.close()
    yield db
    if schema is not None:
        with db_connect(("postgresql", os.environ["DATABASE_URL"])) as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.mark.parametrize("pause", ["short", "past-lease"])
def test_paused_reader_never_writes_back_a_value_older_than_a_delete(
    target: Target, database: tuple[str, str], pause: str
) -> None:
    """Facebook's stale-set race: read DB, (writer commits + deletes), write cache."""
    name = f"staleset-{pause}"
    r = target.sync()
    here, there = SPAWN.Pipe()
    reader = SPAWN.Process(
        target=stale_reader, args=(target.url, target.cluster, database, name, there)
    )
    reader.start()
    cache = seawall.Cache(r, name, ttl=30, lease=1.0, l1_size=0)
    try:
        here.send(("load",))
        assert here.poll(20), "reader never read the database"
        assert here.recv() == ("read", "old")
        os.kill(reader.pid, signal.SIGSTOP)  # type: ignore[arg-type]
        try:
            db_write(database, 1, "new")  # the writer commits, then invalidates
            cache.delete("row:1")
            if pause == "past-lease":
                # Another process loads the new value and the paused reader's lease runs out.
                assert cache.get_or_load("row:1", lambda: "new") == "new"
                time.sleep(1.2)
        finally:
            os.kill(reader.pid, signal.SIGCONT)  # type: ignore[arg-type]
        assert here.poll(20), "resumed reader did not finish"
        assert here.recv() == ("loaded", "old")  # its own answer predates the write
        time.sleep(0.05)
        assert cache.get("row:1") in (None, "new")  # never "old"
        assert cache.get_or_load("row:1", lambda: "new") == "new"
        here.send(("get",))
        assert here.poll(20)
        # The reader's own process does not serve it either; its write-back was voided.
        assert here.recv() == ("got", "new", 1)
    finally:
        here.send(("stop",))
        reader.join(5)
        if reader.is_alive():
            reader.kill()


def test_naive_cache_aside_serves_the_old_value_in_the_same_schedule(
    standalone: Target, tmp_path: Path
) -> None:
    # The control: GET, read DB, SET (the recipe of the seed articles) keeps "old" forever.
    db = ("sqlite", str(tmp_path / "naive.sqlite3"))
    conn = sqlite3.connect(db[1], isolation_level=None)
    conn.execute("CREATE TABLE cache_rows (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("INSERT INTO cache_rows VALUES (1, 'old')")
    conn.close()
    r = standalone.sync()
    assert r.get("naive:row:1") is None
    value = "old"  # the reader read the database; then it is paused
    db_write(db, 1, "new")
    r.delete("naive:row:1")  # the writer's invalidation comes before the reader's SET
    r.set("naive:row:1", value)
    assert r.get("naive:row:1") == b"old"
