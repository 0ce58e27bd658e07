"""One order the database refuses never stalls the OrderSink (issue 10, item 11).

An order id of 192-200 characters used to be accepted by Stock.take (200-byte limit) and
refused by the VARCHAR(191) column, and the refused batch was retried forever: every later
order waited behind it. Now the limits agree, and an entry that a single-row insert still
cannot save is set aside (logged, kept in the stock's dead-letter hash, reported by
reconcile()) while the stream goes on. SQLite always; DATABASE_URL's server when set.
"""

from __future__ import annotations

import json
import logging
import sqlite3

import pytest
import redis
from sinkdb import Database

import seawall

# The sink's own table plus a rule the test's database enforces: no order of 50 units or more.
CHECKED_TABLE = (
    "CREATE TABLE {table} (stock VARCHAR(191) NOT NULL, order_id VARCHAR(191) NOT NULL, "
    "qty INTEGER NOT NULL, cancelled SMALLINT NOT NULL DEFAULT 0, "
    "saved_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP, "
    "PRIMARY KEY (stock, order_id), CHECK (qty < 50))"
)


def _sink(r: redis.Redis, stock: seawall.Stock, db: Database) -> seawall.OrderSink:
    return seawall.OrderSink(r, stock, db.url, table=db.table, claim_idle=0.2)


def _execute(db: Database, sql: str) -> None:
    if db.sqlite:
        with sqlite3.connect(db.url) as conn:
            conn.execute(sql)
        return
    from sqlalchemy import text

    with db.engine().begin() as conn:
        conn.execute(text(sql))


def test_a_long_order_id_is_refused_up_front_or_saved(
    seawall_redis: redis.Redis, database: Database
) -> None:
    stock = seawall.Stock(seawall_redis, "sku:long")
    stock.put(10)
    sink = _sink(seawall_redis, stock, database)
    try:
        long_id = "x" * 195
        try:
            assert stock.take(long_id)
        except ValueError as exc:
            assert "at most 191 bytes" in str(exc)  # refused, naming the limit
            expected = set()
        else:
            expected = {long_id}  # accepted: then it must be saved whole
        # The longest ids accepted fit the column, in ASCII and in 2-byte characters.
        widest = {"y" * 191, "é" * 95}
        assert all(stock.take(order) for order in widest)
        assert stock.take("after")
        sink.drain(timeout=10)
        assert {row[1] for row in database.rows()} == expected | widest | {"after"}
    finally:
        sink.close()


def test_a_poison_entry_is_set_aside_and_later_orders_are_saved(
    seawall_redis: redis.Redis, database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    _execute(database, CHECKED_TABLE.format(table=database.table))
    stock = seawall.Stock(seawall_redis, "sku:poison")
    stock.put(1_000)
    sink = _sink(seawall_redis, stock, database)
    caplog.set_level(logging.WARNING, logger="seawall")
    try:
        for order, qty in (("a", 1), ("poison", 60), ("b", 2)):
            assert stock.take(order, qty)
        sink.drain(timeout=10)  # before: the batch failed, for ever
        assert {row[1] for row in database.rows()} == {"a", "b"}
        messages = [rec.getMessage() for rec in caplog.records if rec.levelno >= logging.ERROR]
        assert any("'poison'" in text and "set aside" in text for text in messages), messages
        dead = seawall_redis.hgetall(stock.keys.dead)
        assert list(dead) == [b"poison"]
        record = json.loads(dead[b"poison"])
        assert record["op"] == "take" and record["qty"] == 60 and record["error"]
        assert seawall_redis.xlen(stock.keys.log) == 0  # acknowledged: the stream goes on

        # Later orders keep flowing, one batch or one row at a time.
        assert stock.take("c", 3)
        assert sink.step() == 1
        assert {row[1] for row in database.rows()} == {"a", "b", "c"}

        report = sink.reconcile()
        assert [order for order, _ in report.set_aside] == ["poison"]
        assert "poison" not in report.inserted
        assert not report.balanced  # 60 units sold in Redis are in no saved row
        assert "set aside" in str(report) and "'poison'" in str(report)

        # Once the database accepts it (here: the table made anew without the rule, so
        # reconcile() also puts a, b and c back), reconcile() saves it and clears the
        # dead letter.
        _execute(database, f"DROP TABLE {database.table}")
        _execute(database, CHECKED_TABLE.format(table=database.table).replace("< 50", "< 500"))
        report = sink.reconcile()
        assert report.set_aside == () and report.balanced, str(report)
        assert seawall_redis.exists(stock.keys.dead) == 0
    finally:
        sink.close()


def test_every_accepted_order_id_fits_the_column() -> None:
    from seawall.stock._sql import KEY_CHARS, create_sql
    from seawall.stock._stock import MAX_ORDER_ID_BYTES

    assert MAX_ORDER_ID_BYTES <= KEY_CHARS  # bytes >= characters, in any UTF-8 text
    assert f"order_id VARCHAR({KEY_CHARS})" in create_sql("t")


def test_a_too_long_stock_name_is_refused_by_the_sink(
    seawall_redis: redis.Redis, database: Database
) -> None:
    stock = seawall.Stock(seawall_redis, "s" * 192)
    with pytest.raises(ValueError, match="191"):
        _sink(seawall_redis, stock, database)
