"""Orders per second saved from a stock's log into PostgreSQL: batched vs one per order.

Each round fills a fresh stock log with N take entries (the fields `Stock.take` writes),
then times how long a consumer needs to save them all into its own table and acknowledge
them. Contenders:
- seawall.OrderSink, batch 500: one transaction and one executemany per 500 entries, one
  XACK+XDEL script per batch;
- seawall.OrderSink, batch 1: the same code, one transaction per order;
- one INSERT per order, by hand: the consumer most people write first (XREADGROUP one
  entry, INSERT ... ON CONFLICT DO NOTHING, COMMIT, XACK), with psycopg directly.
Contenders take turns in passes (A, B, C, then C, B, A), so a noisy neighbour slows all.
The database is a private PostgreSQL started for the run (seawall.launcher, as the tests
start theirs: needs the postgresql package), or the one --database or $DATABASE_URL names.

    PYTHONPATH=src .venv/bin/python bench/sink.py [--quick] [--json PATH]
        [--database postgresql+psycopg://postgres@127.0.0.1:5432/test]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import redis
from _harness import (
    Column,
    Goal,
    Table,
    format_goals,
    format_table,
    machine_note,
    median,
    parse_args,
    server_note,
    write_json,
)

import seawall
from seawall.shared._keys import stock_keys

FILL_PIPELINE = 1000


@dataclass(frozen=True)
class Contender:
    name: str
    orders: int  # per round (the slow contender gets fewer, timed the same way)
    # (client, stock, url, table) -> (save everything -> orders saved, clean up); only the
    # saving is timed: connecting and creating the table happen once in real life.
    prepare: Callable[[redis.Redis, str, str, str], tuple[Callable[[], int], Callable[[], None]]]


def _order_sink(
    batch: int,
) -> Callable[[redis.Redis, str, str, str], tuple[Callable[[], int], Callable[[], None]]]:
    def prepare(
        client: redis.Redis, stock: str, url: str, table: str
    ) -> tuple[Callable[[], int], Callable[[], None]]:
        sink = seawall.OrderSink(client, stock, url, table=table, batch=batch)
        sink.table.count()  # connected
        return (lambda: sink.drain(timeout=600)), sink.close

    return prepare


def _one_insert_per_order(
    client: redis.Redis, stock: str, url: str, table: str
) -> tuple[Callable[[], int], Callable[[], None]]:
    import psycopg

    log = stock_keys(stock).log
    group = "hand-written"
    client.xgroup_create(log, group, id="0", mkstream=True)
    conn = psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://", 1))
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {table} (stock VARCHAR(191) NOT NULL, "
        "order_id VARCHAR(191) NOT NULL, qty INTEGER NOT NULL, "
        "PRIMARY KEY (stock, order_id))"
    )
    conn.commit()

    def save() -> int:
        saved = 0
        while True:
            reply = client.xreadgroup(group, "c1", {log: ">"}, count=1)
            if not reply:
                return saved
            entry_id, fields = reply[0][1][0]
            conn.execute(
                f"INSERT INTO {table} (stock, order_id, qty) VALUES (%s, %s, %s) "
                "ON CONFLICT (stock, order_id) DO NOTHING",
                (stock, fields[b"order"].decode(), int(fields[b"qty"])),
            )
            conn.commit()
            client.xack(log, group, entry_id)
            saved += 1

    return save, conn.close


COLUMNS = [
    Column("ops", "orders/s", ",.0f"),
    Column("ops_min", "min", ",.0f"),
    Column("ops_max", "max", ",.0f"),
    Column("us", "us/order", ".0f"),
    Column("ratio", "x one-per-order", ".1f"),
    Column("orders", "orders/round", ",.0f"),
]
HEADLINE = "ops"
FIRST = "contender"
BASELINE = "one INSERT per order (hand-written)"

GOALS = [
    Goal(
        "seawall.OrderSink (batch 500) >= 5,000 orders/s into PostgreSQL",
        "seawall.OrderSink (batch 500)",
        "ops",
        ">=",
        5000.0,
    ),
]


def fill(client: redis.Redis, stock: str, orders: int) -> None:
    """The log as `orders` calls of Stock.take would leave it (written in pipelines)."""
    log = stock_keys(stock).log
    for first in range(0, orders, FILL_PIPELINE):
        pipe = client.pipeline(transaction=False)
        for n in range(first, min(first + FILL_PIPELINE, orders)):
            pipe.xadd(log, {"op": "take", "order": f"o{n}", "qty": "1"})
        pipe.execute()


def drop(url: str, table: str) -> None:
    import sqlalchemy

    engine = sqlalchemy.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sqlalchemy.text(f"DROP TABLE IF EXISTS {table}"))
    engine.dispose()


def one_round(client: redis.Redis, url: str, contender: Contender) -> float:
    """Orders per second of one round (a fresh stock and table)."""
    stock = f"bench:sink:{uuid.uuid4().hex[:10]}"
    table = f"bench_sink_{uuid.uuid4().hex[:10]}"
    fill(client, stock, contender.orders)
    save, close = contender.prepare(client, stock, url, table)
    try:
        started = time.perf_counter()
        saved = save()
        elapsed = time.perf_counter() - started
        if saved != contender.orders:
            raise SystemExit(f"{contender.name} saved {saved} of {contender.orders} orders")
        return saved / elapsed
    finally:
        close()
        client.delete(stock_keys(stock).log)
        drop(url, table)


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--passes", type=int, default=3, help="rounds per contender")
    parser.add_argument(
        "--database",
        default=os.environ.get("DATABASE_URL"),
        help="SQLAlchemy URL of a PostgreSQL database (default: $DATABASE_URL, else a private "
        "server started for the run)",
    )


@contextlib.contextmanager
def database(url: str | None) -> Iterator[str]:
    """`url`, or that of a private PostgreSQL that lives as long as the block."""
    if url is not None:
        yield url
        return
    from seawall.launcher._postgres import PostgresProcess

    with PostgresProcess() as server:
        yield server.url().replace("postgresql://", "postgresql+psycopg://", 1)


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], _arguments)
    batched = 5_000 if args.quick else 20_000
    single = 500 if args.quick else 2_000
    passes = 1 if args.quick else args.passes
    contenders = [
        Contender("seawall.OrderSink (batch 500)", batched, _order_sink(500)),
        Contender("seawall.OrderSink (batch 1)", single, _order_sink(1)),
        Contender(BASELINE, single, _one_insert_per_order),
    ]
    with seawall.server() as url, database(args.database) as db_url:
        client = redis.Redis.from_url(url)
        print(f"sink: {machine_note()}; {server_note(client)}; database {db_url}")
        print(f"{passes} passes x {len(contenders)} contenders\n")
        rounds: dict[str, list[float]] = {c.name: [] for c in contenders}
        for index in range(passes):
            order = contenders if index % 2 == 0 else contenders[::-1]
            for contender in order:
                rounds[contender.name].append(one_round(client, db_url, contender))
        client.close()
    table: Table = {}
    for contender in contenders:
        values = rounds[contender.name]
        ops = median(values)
        table[contender.name] = {
            "ops": ops,
            "ops_min": min(values),
            "ops_max": max(values),
            "us": 1e6 / ops,
            "orders": float(contender.orders),
        }
    base = table[BASELINE]["ops"]
    for metrics in table.values():
        metrics["ratio"] = metrics["ops"] / base
    print(format_table(COLUMNS, table, first=FIRST))
    print("\nGoals:\n" + format_goals(GOALS, table))
    write_json(args.json, "sink", table, {"database": args.database or "private", "passes": passes})


if __name__ == "__main__":
    main()
