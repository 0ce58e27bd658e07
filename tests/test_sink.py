"""OrderSink and reconcile against a real server and a real database (SQLite; and the
server in DATABASE_URL when set): every order one row, cancels end right, books balance."""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import pytest
import redis
from sinkdb import Database
from sinkworkers import buy, start_together

import seawall
import seawall.aio

UNITS = 100
BUYERS = 2000
PROCESSES = 8


def _sink(r: redis.Redis, stock: seawall.Stock, db: Database, **kwargs: Any) -> seawall.OrderSink:
    return seawall.OrderSink(r, stock, db.url, table=db.table, **kwargs)


# --- acceptance 1 (DB part): 2,000 buyers in 8 processes for 100 units ---------------------


def test_flash_sale_saves_exactly_the_units_sold(
    seawall_redis: redis.Redis, seawall_url: str, database: Database, process_pool: Any
) -> None:
    stock = seawall.Stock(seawall_redis, "sku:sale")
    stock.put(UNITS)
    start_key = f"{{start}}:{uuid.uuid4().hex}"
    ids = [f"buyer-{n}" for n in range(BUYERS)]
    chunks = [ids[p::PROCESSES] for p in range(PROCESSES)]
    # Two sinks save while the sale runs; a third drains what is left.
    stop = threading.Event()
    sinks = [_sink(seawall_redis, stock, database, batch=16) for _ in range(2)]
    threads = [threading.Thread(target=s.run, args=(stop,), kwargs={"block": 0.2}) for s in sinks]
    for thread in threads:
        thread.start()
    try:
        pending = process_pool.starmap_async(
            buy, [(seawall_url, "sku:sale", chunk, start_key) for chunk in chunks]
        )
        start_together(seawall_redis, start_key, PROCESSES)
        sold = [order for chunk in pending.get(60) for order in chunk]
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
    last = _sink(seawall_redis, stock, database)
    last.drain(timeout=30)

    assert len(sold) == UNITS
    rows = database.rows()
    assert len(rows) == UNITS
    assert sorted(order for _, order, _, _ in rows) == sorted(sold)
    assert {(s, qty, cancelled) for s, _, qty, cancelled in rows} == {("sku:sale", 1, 0)}
    assert last.saved_count() == UNITS
    assert seawall_redis.xlen(stock.keys.log) == 0  # trimmed once saved
    report = last.reconcile()
    assert report.balanced, str(report)
    assert report.before.difference == 0 and not report.inserted
    for sink in [*sinks, last]:
        sink.close()


# --- cancels, batching, idempotent replays --------------------------------------------------


def test_cancels_end_cancelled_whatever_the_order(
    seawall_redis: redis.Redis, database: Database
) -> None:
    stock = seawall.Stock(seawall_redis, "sku:c")
    stock.put(10)
    for n in range(10):
        assert stock.take(f"o{n}")
    # A cancel saved before its take (the take pending on a dead consumer): written here
    # as the sink would meet them, cancels first, then the takes replayed.
    entries = seawall_redis.xrange(stock.keys.log)
    for n in range(0, 10, 2):
        assert stock.cancel(f"o{n}")
    sink = _sink(seawall_redis, stock, database, batch=3)
    cancels = seawall_redis.xrange(stock.keys.log)[10:]
    sink.table.apply("sku:c", [c for c in map(_change, cancels) if c])
    sink.table.apply("sku:c", [c for c in map(_change, entries) if c])
    assert sink.drain(timeout=10) == 15
    sink.table.apply("sku:c", [c for c in map(_change, entries + cancels) if c])  # replay
    rows = {order: (qty, cancelled) for _, order, qty, cancelled in database.rows()}
    assert rows == {f"o{n}": (1, 1 if n % 2 == 0 else 0) for n in range(10)}
    assert sink.saved_count() == 5
    assert sink.reconcile().balanced
    sink.close()


def _change(entry: Any) -> Any:
    from seawall.stock._orders import change_from_entry

    return change_from_entry(entry[1])


def test_drain_splits_batches_and_leaves_nothing_pending(
    seawall_redis: redis.Redis, database: Database
) -> None:
    stock = seawall.Stock(seawall_redis, "sku:b")
    stock.put(250)
    for n in range(250):
        stock.take(f"o{n}", 1)
    sink = _sink(seawall_redis, stock, database, batch=40, trim=False)
    assert sink.drain(timeout=10) == 250
    assert sink.drain(timeout=10) == 0
    assert seawall_redis.xpending(stock.keys.log, sink.group)["pending"] == 0
    assert seawall_redis.xlen(stock.keys.log) == 250  # trim=False keeps the entries
    assert database.count() == 250
    sink.close()


def test_reconcile_inserts_orders_a_crash_left_unsaved_and_marks_cancels(
    seawall_redis: redis.Redis, database: Database
) -> None:
    stock = seawall.Stock(seawall_redis, "sku:r")
    stock.put(50)
    for n in range(30):
        stock.take(f"o{n}")
    sink = _sink(seawall_redis, stock, database)
    # Nothing saved yet (the sink "crashed"): 30 units on sale are in no saved order.
    report = sink.reconcile(repair=False)
    assert report.before.difference == 30 and report.after.difference == 30
    assert not report.balanced and database.count() == 0
    report = sink.reconcile()
    assert (report.before.difference, report.after.difference) == (30, 0)
    assert len(report.inserted) == 30 and report.balanced
    # Saved, then cancelled in Redis before the sink saw the cancels.
    for n in range(5):
        stock.cancel(f"o{n}")
    report = sink.reconcile()
    assert report.before.difference == -5
    assert report.cancelled == tuple(f"o{n}" for n in range(5))
    assert report.balanced and report.after.saved == 25
    # The sink then replays the whole log: nothing changes.
    assert sink.drain(timeout=10) == 35
    assert sink.reconcile().balanced
    assert database.count() == 30 and sink.saved_count() == 25
    sink.close()


def test_reconcile_reports_rows_redis_does_not_know(
    seawall_redis: redis.Redis, database: Database
) -> None:
    stock = seawall.Stock(seawall_redis, "sku:lost")
    stock.put(5)
    stock.take("a")
    stock.take("b")
    sink = _sink(seawall_redis, stock, database)
    sink.drain(timeout=10)
    seawall_redis.flushall()  # Redis lost its data: the rows are now ahead of it
    stock.put(5)
    stock.take("a")
    report = sink.reconcile()
    assert report.conflicts == ("b",)
    assert not report.balanced and "NOT balanced" in str(report)
    assert database.count() == 2  # never moved back
    sink.close()


def test_async_sink_drains_and_reconciles(seawall_url: str, database: Database) -> None:
    async def main() -> None:
        r = redis.asyncio.Redis.from_url(seawall_url)
        stock = seawall.aio.Stock(r, "sku:aio")
        await stock.put(20)
        for n in range(25):
            await stock.take(f"o{n}")
        await stock.cancel("o1")
        sink = seawall.aio.OrderSink(r, stock, database.url, table=database.table, batch=7)
        stop = asyncio.Event()
        runner = asyncio.create_task(sink.run(stop, block=0.1))
        assert await sink.drain(timeout=10) >= 0
        stop.set()
        await runner
        assert database.count() == 20
        report = await sink.reconcile()
        assert report.balanced and report.after.saved == 19
        sink.close()
        await r.aclose()

    asyncio.run(main())


def test_errors_name_what_to_fix(seawall_redis: redis.Redis, tmp_path: Any) -> None:
    path = str(tmp_path / "x.db")
    with pytest.raises(ValueError, match="table name"):
        seawall.OrderSink(seawall_redis, "s", path, table="orders; DROP TABLE x")
    with pytest.raises(ValueError, match="batch"):
        seawall.OrderSink(seawall_redis, "s", path, batch=0)
    with pytest.raises(TypeError, match=r"seawall\.aio\.OrderSink"):
        seawall.OrderSink(redis.asyncio.Redis(), "s", path)
    with pytest.raises(TypeError, match="SQLite path"):
        seawall.OrderSink(seawall_redis, "s", 42)
    with pytest.raises(ValueError, match="supports PostgreSQL"):
        seawall.OrderSink(seawall_redis, "s", "oracle+nothing://x/y")
    sink = seawall.OrderSink(seawall_redis, "s", path, claim_idle=30.0)
    seawall_redis.xadd(sink.keys.log, {"op": "take", "order": "a", "qty": "1"})
    # Another consumer holds the entry; it is not idle for 30 s yet.
    seawall_redis.xgroup_create(sink.keys.log, sink.group, id="0", mkstream=True)
    seawall_redis.xreadgroup(sink.group, "dead", {sink.keys.log: ">"})
    with pytest.raises(seawall.DrainTimeout, match=r"'s'.*1 entries pending") as caught:
        sink.drain(timeout=0.3)
    assert caught.value.stock_name == "s"
    sink.close()


def test_sink_and_guard_run_on_cluster(target: Any, tmp_path: Any) -> None:
    """Every key of a stock and of a message shares one hash tag: the scripts run on Cluster."""
    r = target.sync()
    stock = seawall.Stock(r, "sku:cl")
    stock.put(10)
    for n in range(12):
        stock.take(f"o{n}")
    stock.cancel("o2")
    sink = seawall.OrderSink(r, stock, str(tmp_path / "c.db"), batch=4, claim_idle=0.2)
    assert sink.drain(timeout=10) == 11
    report = sink.reconcile()
    assert report.balanced and report.after.saved == 9, str(report)
    sink.close()
    guard = seawall.Idempotent(r, "cl", timeout=5)
    assert guard.run("m", lambda: 1) == 1 and guard.run("m", lambda: 2) == 1
