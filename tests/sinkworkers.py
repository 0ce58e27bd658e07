"""Code that runs in child processes of the sink and idempotency tests ("spawn").

Processes that must start together wait for a token on a list (BLPOP), as the stock
tests do; a sink that must die at an exact point stops itself with SIGSTOP from the
sink's checkpoint hook, and the test SIGKILLs it while it is stopped.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import redis
import redis.exceptions

import seawall

START_TIMEOUT = 30


def wait_for_start(r: Any, start_key: str) -> None:
    """Say this worker is ready, then wait for its start token (see start_together)."""
    r.incr(f"{start_key}:ready")
    r.expire(f"{start_key}:ready", 600)
    assert r.blpop([start_key], START_TIMEOUT) is not None, "no start token"


def start_together(r: Any, start_key: str, workers: int) -> None:
    """Hand out the start tokens once all `workers` are ready, so none of them is still
    starting (a spawned process takes a second or more on a busy machine) while the
    others have done all the work."""
    deadline = time.monotonic() + START_TIMEOUT
    while int(r.get(f"{start_key}:ready") or 0) < workers:
        assert time.monotonic() < deadline, f"only {r.get(f'{start_key}:ready')} workers ready"
        time.sleep(0.01)
    r.rpush(start_key, *range(workers))


THREADS = 8


def buy(
    url: str, name: str, order_ids: Sequence[str], start_key: str, pace: float = 0.0
) -> list[str]:
    """One take of 1 unit per order id, `pace` seconds apart; retried through connection
    errors (a Redis restart), which is safe because a retried order id never takes
    twice. Returns the ids that hold a unit."""
    r = redis.Redis.from_url(url, socket_timeout=5, retry_on_timeout=False)
    stock = seawall.Stock(r, name)
    wait_for_start(r, start_key)
    sold = []
    for order_id in order_ids:
        deadline = time.monotonic() + 30
        while True:
            try:
                if stock.take(order_id):
                    sold.append(order_id)
                break
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
                assert time.monotonic() < deadline, "Redis did not come back"
                time.sleep(0.02)
        if pace:
            time.sleep(pace)
    r.close()
    return sold


def stop_at(stage: str) -> Any:
    """A checkpoint that freezes this process (SIGSTOP) when the sink reaches `stage`."""

    def checkpoint(reached: str, ids: Sequence[str]) -> None:
        if reached == stage:
            os.kill(os.getpid(), signal.SIGSTOP)

    return checkpoint


def sink_until(url: str, name: str, database: str, table: str, stage: str, batch: int) -> None:
    """Run a sink that stops itself at `stage` of its first batch; the test kills it."""
    r = redis.Redis.from_url(url)
    sink = seawall.OrderSink(r, name, database, table=table, batch=batch, checkpoint=stop_at(stage))
    sink.step(block=10.0)
    raise AssertionError(f"the sink passed {stage!r} without stopping")


# --- idempotent consumers -------------------------------------------------------------------


def _insert_row(database: str, table: str, message_id: str, pid: int) -> None:
    """The handler's effect: a plain INSERT, so a second run of one message fails loudly."""
    sql = f"INSERT INTO {table} (message_id, pid) VALUES (:message_id, :pid)"
    params = {"message_id": message_id, "pid": pid}
    if "://" not in database:
        _sqlite(database).execute(sql, params)
        return
    import sqlalchemy

    engine = _engine(database)
    with engine.begin() as conn:
        conn.execute(sqlalchemy.text(sql), params)


_engines: dict[str, Any] = {}
_sqlites = threading.local()


def _engine(url: str) -> Any:
    """One engine per process. Commits are not flushed to disk one by one: the tests count
    rows, and a machine shared by many test runs makes every fsync slow."""
    if url not in _engines:
        import sqlalchemy

        args = {"options": "-c synchronous_commit=off"} if url.startswith("postgresql") else {}
        _engines[url] = sqlalchemy.create_engine(url, connect_args=args)
    return _engines[url]


def _sqlite(path: str) -> sqlite3.Connection:
    """One connection per thread (sqlite3 connections stay in their thread)."""
    found: dict[str, sqlite3.Connection] = _sqlites.__dict__.setdefault("by_path", {})
    if path not in found:
        conn = sqlite3.connect(path, timeout=60, isolation_level=None)
        conn.execute("PRAGMA synchronous=OFF")
        found[path] = conn
    return found[path]


def consume(
    url: str,
    namespace: str,
    message_ids: Sequence[str],
    database: str,
    table: str,
    runs_key: str,
    start_key: str,
) -> list[str]:
    """Handle every message through one `Idempotent`, as each of 4 consumers is handed
    the same messages at once, in the same order, by THREADS threads (as a consumer with
    prefetch would). Each handler run is counted in Redis and inserts a row. Returns the
    outcomes, which must name one pid per message whoever ran it."""
    r = redis.Redis.from_url(url)
    guard = seawall.Idempotent(r, namespace, ttl=600, lease=10, timeout=30)
    pid = os.getpid()

    def handle(message_id: str) -> str:
        r.incr(runs_key)
        _insert_row(database, table, message_id, pid)
        return f"{message_id}:{pid}"

    wait_for_start(r, start_key)
    with ThreadPoolExecutor(THREADS) as pool:
        outcomes = list(pool.map(lambda m: guard.run(m, handle, m), message_ids))
    r.close()
    return outcomes


def consume_in_transaction(
    database: str,
    table: str,
    dedupe_table: str,
    message_ids: Sequence[str],
    url: str,
    start_key: str,
) -> int:
    """The exactly-once form: claim_message and the write in one SQL transaction.
    Returns how many messages this process wrote."""
    r = redis.Redis.from_url(url)
    pid = os.getpid()
    written = 0
    wait_for_start(r, start_key)
    insert = f"INSERT INTO {table} (message_id, pid) VALUES (:message_id, :pid)"
    for message_id in message_ids:
        params = {"message_id": message_id, "pid": pid}
        if "://" not in database:
            conn = _sqlite(database)
            conn.execute("BEGIN IMMEDIATE")
            if seawall.claim_message(conn, message_id, namespace="t", table=dedupe_table):
                conn.execute(insert, params)
                written += 1
            conn.execute("COMMIT")
            continue
        import sqlalchemy

        with _engine(database).begin() as sa_conn:
            if seawall.claim_message(sa_conn, message_id, namespace="t", table=dedupe_table):
                sa_conn.execute(sqlalchemy.text(insert), params)
                written += 1
    r.close()
    return written


def claim_and_hang(url: str, namespace: str, message_id: str, started_key: str) -> None:
    """Claim `message_id` and never finish: the handler signals, then sleeps until killed."""
    r = redis.Redis.from_url(url)
    guard = seawall.Idempotent(r, namespace, lease=0.5, timeout=30)

    def handler() -> str:
        r.rpush(started_key, os.getpid())
        time.sleep(3600)
        return "never"

    guard.run(message_id, handler)
