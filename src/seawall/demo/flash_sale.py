"""Scenario: a flash sale, 2,000 buyers in 8 processes for 100 units, four ways.

- read-then-decrement (the seeds' first recipe): GET the stock, and if it is positive,
  DECR it. Between the two, other buyers read the same count, so more units are sold than
  there are.
- WATCH/MULTI: optimistic; correct, but every concurrent change aborts the transaction,
  which is retried.
- a lock (`seawall.Lock`) around read-then-decrement: correct, one buyer at a time.
- `seawall.Stock`: one script checks, takes, records the order id and logs the order.
Then an `OrderSink` saves the Stock round's orders into a SQLite table and `reconcile()`
proves the books balance: units on sale = units available + units in saved orders.

Every buyer "thinks" for a moment between reading the stock and taking a unit (validating
the cart, say), as real checkouts do; it only widens the window each recipe already has.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import redis

import seawall
from seawall.demo._table import Cell, Column, Table, seconds
from seawall.demo._workers import client

if TYPE_CHECKING:
    from seawall.demo._context import DemoContext

Method = Literal["read-decrement", "watch", "lock", "stock"]

UNITS = 100
BUYERS = 2000
QUICK_BUYERS = 800  # --quick: still 8 buyers per unit, so every unsafe race still shows
THINK_SECONDS = 0.0005
_ROUND_TIMEOUT = 60.0
_DRAIN_TIMEOUT = 30.0


@dataclass(frozen=True)
class BuyerReport:
    sold: int  # buyers of this worker that got a unit
    aborted: int = 0  # WATCH/MULTI transactions aborted by a concurrent change


def buy(url: str, method: Method, key: str, order_ids: list[str]) -> BuyerReport:
    """Worker task: one purchase attempt per order id, with `method`."""
    r = client(url)
    if method == "stock":
        stock = seawall.Stock(r, key)
        return BuyerReport(sold=sum(stock.take(order_id) for order_id in order_ids))
    if method == "watch":
        return _buy_watching(r, key, len(order_ids))
    sold = 0
    lock = seawall.Lock(r, f"{key}:lock", ttl=5.0)
    for _ in order_ids:
        if method == "lock":
            with lock:
                sold += _read_then_decrement(r, key)
        else:
            sold += _read_then_decrement(r, key)
    return BuyerReport(sold=sold)


def _read_then_decrement(r: redis.Redis, key: str) -> bool:
    if int(r.get(key) or 0) <= 0:
        return False
    time.sleep(THINK_SECONDS)
    r.decr(key)
    return True


def _buy_watching(r: redis.Redis, key: str, attempts: int) -> BuyerReport:
    sold = aborted = 0
    with r.pipeline(transaction=True) as pipe:
        for _ in range(attempts):
            while True:
                try:
                    pipe.watch(key)  # type: ignore[no-untyped-call]
                    if int(pipe.get(key) or 0) <= 0:
                        pipe.unwatch()
                        break
                    time.sleep(THINK_SECONDS)
                    pipe.multi()
                    pipe.decr(key)
                    pipe.execute()
                    sold += 1
                    break
                except redis.WatchError:
                    aborted += 1  # someone changed the stock since our read: try again
    return BuyerReport(sold=sold, aborted=aborted)


def run(ctx: DemoContext) -> Table:
    workers = len(ctx.workers)
    buyers = QUICK_BUYERS if ctx.quick else BUYERS
    table = Table(
        title=f"A flash sale: {buyers:,} buyers in {workers} processes for {UNITS} units",
        columns=[
            Column("method"),
            Column("sold", ">"),
            Column("oversold", ">"),
            Column("attempts/s", ">"),
            Column("time", ">"),
            Column("notes", wrap=True),
        ],
        intro=[
            f"{buyers:,} buyers, {buyers // workers} per process, each tries once to buy one "
            f"of {UNITS} units; a buyer thinks {THINK_SECONDS * 1000:g} ms between reading "
            "the stock and taking a unit.",
        ],
    )
    ids = [f"buyer-{n}" for n in range(buyers)]
    plan = [ids[w::workers] for w in range(workers)]
    rounds: list[tuple[Method, str]] = [
        ("read-decrement", "read-then-decrement"),
        ("watch", "WATCH/MULTI"),
        ("lock", "seawall.Lock + GET"),
        ("stock", "seawall.Stock"),
    ]
    for method, label in rounds:
        ctx.progress(f"flash sale: {label}")
        key = ctx.name(f"sale:{method}")
        if method == "stock":
            seawall.Stock(ctx.client, key).put(UNITS)
        else:
            ctx.client.set(key, UNITS)
        started = time.monotonic()
        reports: list[BuyerReport] = ctx.workers.run_all(
            buy, [(ctx.url, method, key, chunk) for chunk in plan], timeout=_ROUND_TIMEOUT
        )
        elapsed = time.monotonic() - started
        sold = sum(report.sold for report in reports)
        oversold = max(sold - UNITS, 0)
        if method == "stock":
            note = _save_orders(ctx, key)
        elif method == "watch":
            aborted = sum(report.aborted for report in reports)
            note = f"correct; {aborted:,} transactions aborted by a concurrent change and retried"
        elif method == "lock":
            note = "correct; buyers queue for the lock one at a time"
        else:
            note = "buyers that read the same count all decrement it"
        table.add(
            label,
            str(sold),
            Cell(str(oversold), "bad" if oversold else "good"),
            f"{buyers / elapsed:,.0f}",
            seconds(elapsed),
            note,
        )
    table.notes = [
        "oversold = units sold beyond the 100 on sale. attempts/s: purchase attempts per "
        "second over the whole round, all processes together.",
        "seawall.Stock logs each order in the same script that takes it; the OrderSink "
        "saves the log to SQL with idempotent inserts and acknowledges after COMMIT, so a "
        "sink that dies mid-batch loses and duplicates nothing.",
    ]
    return table


def _save_orders(ctx: DemoContext, name: str) -> str:
    ctx.progress("flash sale: saving the orders to SQLite")
    with tempfile.TemporaryDirectory(prefix="seawall-demo-") as folder:
        sink = seawall.OrderSink(ctx.client, name, str(Path(folder) / "orders.db"))
        try:
            sink.drain(timeout=_DRAIN_TIMEOUT)
            rows = sink.saved_count()
            report = sink.reconcile(repair=False)
        finally:
            sink.close()
    books = report.after
    verdict = "balanced" if report.balanced else "NOT balanced"
    return (
        f"orders table after the sink drained: {rows} rows; books {verdict} (on sale "
        f"{books.on_sale} = available {books.available} + saved {books.saved})"
    )
