"""OrderSink: every order a Stock takes reaches the SQL table exactly once.

A take or cancel appends an entry to the stock's log stream in the same script that
changes the stock, so an order exists in Redis if and only if its entry does. The sink
reads the log in a consumer group, writes a batch of entries in one SQL transaction with
idempotent statements keyed by (stock, order id), and acknowledges the entries only after
the COMMIT. Whatever dies, and wherever:
- before the COMMIT: the entries stay pending; a live sink claims them once they have been
  idle `claim_idle` seconds (XAUTOCLAIM) and writes them;
- after the COMMIT, before the acknowledgement: the same, and writing them again changes
  nothing (the row exists; a cancel stays a cancel).
So each order is one row, whatever the number of sinks, crashes and replays.

An entry the database refuses for its own content (a CHECK it breaks, bytes it cannot
store) fails again however often it is retried: when a batch fails so, its rows are saved
one at a time, and a row that still fails is set aside (logged, kept in the stock's
dead-letter hash, listed by reconcile()) and acknowledged, so later orders are not held up
behind it for ever.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import redis.exceptions

from seawall.errors import DrainTimeout
from seawall.metrics._families import ORDER_SINK_LAG, ORDER_SINK_SAVED
from seawall.metrics._sink import SINK as metrics_sink
from seawall.shared import _concurrency, _scripts
from seawall.shared._async.scripts import run_script
from seawall.shared._concurrency import (
    async_offload,
    async_sleep,
    async_stop_if_cancelled,
    log,
)
from seawall.shared._keys import stock_keys
from seawall.shared._validate import check_async_client, check_name, check_seconds, check_timeout
from seawall.stock._orders import (
    OrderChange,
    ReconcileReport,
    balance,
    change_from_entry,
    parse_order_value,
    plan_repairs,
)
from seawall.stock._sql import (
    DEFAULT_TABLE,
    KEY_CHARS,
    OrderTable,
    open_table,
    row_errors,
    transient_errors,
)

_ACK = _scripts.load("seawall.stock", "sink_ack")
_BOOKS = _scripts.load("seawall.stock", "stock_books")

DEFAULT_GROUP = "seawall-sink"
MAX_BATCH = 10_000
# After an error (Redis restarting, database unreachable) the loop waits this long, then
# doubles it up to the ceiling, so a long outage costs little and a short one little time.
RETRY_FIRST = 0.05
RETRY_CEILING = 2.0
# While entries are pending on another (live or dead) sink, drain() looks again this often.
DRAIN_RECHECK = 0.1

_REDIS_TRANSIENT = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    redis.exceptions.BusyLoadingError,
)

Checkpoint = Callable[[str, Sequence[str]], Any]


class StopFlag(Protocol):
    """threading.Event, asyncio.Event, or anything with is_set()."""

    def is_set(self) -> bool: ...


class AsyncOrderSink:
    """Saves one stock's orders from its log stream into a SQL table.

    `stock`: a `Stock` (or its name). `database`: a SQLite file path (ending .db, .sqlite or
    .sqlite3), or a SQLAlchemy URL ("postgresql://user@host/db", "mysql://user@host/db":
    an installed driver is picked when the URL names none; "sqlite:///path"). Several sinks
    (processes, machines) may serve one stock: they share the consumer `group` and split
    the entries; each needs its own `consumer` name (a unique default is made).

    `checkpoint(stage, entry_ids)` is a hook for fault tests and tracing: it is called
    with "read" after entries are read and before they are written, and with "saved"
    after the COMMIT and before the acknowledgement.
    """

    def __init__(
        self,
        client: Any,
        stock: Any,
        database: Any,
        *,
        table: str = DEFAULT_TABLE,
        group: str = DEFAULT_GROUP,
        consumer: str | None = None,
        batch: int = 500,
        claim_idle: float = 30.0,
        trim: bool = True,
        checkpoint: Checkpoint | None = None,
    ) -> None:
        self._client = check_async_client(client, "OrderSink")
        name = stock if isinstance(stock, str) else getattr(stock, "name", None)
        self.stock_name = check_name(name, "OrderSink stock")
        if len(self.stock_name) > KEY_CHARS:
            raise ValueError(
                f"OrderSink: stock name {self.stock_name[:40]!r}... has "
                f"{len(self.stock_name)} characters; the orders table's stock column holds "
                f"at most {KEY_CHARS}: sell it under a shorter Stock name"
            )
        self.keys = stock_keys(self.stock_name)
        self.group = check_name(group, "OrderSink group")
        self.consumer = check_name(
            consumer or f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}",
            "OrderSink consumer",
        )
        if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= MAX_BATCH:
            raise ValueError(f"batch must be an int from 1 to {MAX_BATCH}, got {batch!r}")
        self.batch = batch
        self.claim_idle = check_seconds(claim_idle, "claim_idle")
        self.trim = bool(trim)
        self._checkpoint = checkpoint
        self.table: OrderTable = open_table(database, table)
        self._transient: tuple[type[BaseException], ...] = (
            *_REDIS_TRANSIENT,
            *transient_errors(self.table),
        )
        self._row_errors = row_errors(self.table)
        self._group_ready = False
        # A consumer restarted under the same name first finishes what it had read.
        self._own_pending = True
        self._claim_due = 0.0  # when to look for entries abandoned by dead consumers
        self._claim_cursor = "0-0"

    def __repr__(self) -> str:
        return (
            f"OrderSink(stock={self.stock_name!r}, table={self.table.table!r} in "
            f"{self.table.where}, group={self.group!r}, consumer={self.consumer!r})"
        )

    # -- the loop --------------------------------------------------------------------------

    async def step(self, block: float | None = None) -> int:
        """Save one batch: own pending entries, then abandoned ones, then new ones.

        Waits up to `block` seconds for new entries (None: not at all). Returns the
        number of entries saved and acknowledged.
        """
        await self._ensure_group()
        entries: list[Any] = []
        if self._own_pending:
            entries = await self._read("0", None)
            self._own_pending = len(entries) >= self.batch
        if not entries and _concurrency.monotonic() >= self._claim_due:
            entries = await self._claim()
        if not entries:
            entries = await self._read(">", block)
        if not entries:
            return 0
        return await self._save(entries)

    async def run(self, stop_event: StopFlag | None = None, *, block: float = 1.0) -> int:
        """Save entries as they come until `stop_event` is set (forever without one).

        Outages of Redis or the database are waited out (logged, retried with backoff);
        the stop flag is looked at least every `block` seconds. Returns entries saved.
        """
        block = check_seconds(block, "block")
        saved = 0
        delay = RETRY_FIRST
        while stop_event is None or not stop_event.is_set():
            # redis-py's asyncio client may swallow a cancellation that lands while it
            # reads a reply (a step's XREADGROUP): a cancelled run must still end.
            async_stop_if_cancelled()
            try:
                saved += await self.step(block)
                delay = RETRY_FIRST
            except self._transient as exc:
                log.warning("%r: %r; retrying in %.2f s", self, exc, delay)
                await async_sleep(delay)
                delay = min(delay * 2, RETRY_CEILING)
        return saved

    async def drain(self, timeout: float | None = 30.0) -> int:
        """Save until the log has nothing unread and nothing pending; the entries saved.

        Entries pending on another consumer are claimed once idle `claim_idle` seconds,
        so draining after a sink died takes up to that long. Raises `DrainTimeout` when
        `timeout` runs out first (after retrying transient errors until then).
        """
        limit = check_timeout(timeout, "drain timeout")
        deadline = None if limit is None else _concurrency.monotonic() + limit
        saved = 0
        delay = RETRY_FIRST
        last_error: BaseException | None = None
        while True:
            async_stop_if_cancelled()  # as in run()
            remaining = None if deadline is None else deadline - _concurrency.monotonic()
            if remaining is not None and remaining <= 0:
                raise DrainTimeout(
                    f"OrderSink for stock {self.stock_name!r} did not drain its log in "
                    f"{limit} s ({await self._pending_or_unknown()} entries pending, "
                    f"last error: {last_error!r}); is a sink holding entries it cannot "
                    "save, or is claim_idle longer than the timeout?",
                    stock_name=self.stock_name,
                ) from last_error
            try:
                done = await self.step(None)
                saved += done
                if done:
                    continue
                wait = await self._wait_for_abandoned()
                if wait is None:
                    return saved
                # Woken at once by a new entry; otherwise looks again after a slice (the
                # sink holding those entries may acknowledge them any moment) or when the
                # oldest of them may be claimed, whichever comes first.
                wait = min(wait, DRAIN_RECHECK)
                if remaining is not None:
                    wait = min(wait, remaining)
                saved += await self._save_if_any(await self._read(">", max(wait, 0.001)))
                delay = RETRY_FIRST
            except self._transient as exc:
                last_error = exc
                await async_sleep(delay if remaining is None else min(delay, remaining))
                delay = min(delay * 2, RETRY_CEILING)

    # -- reconciling --------------------------------------------------------------------------

    async def reconcile(self, repair: bool = True) -> ReconcileReport:
        """Compare the stock in Redis with the saved orders; repair what a crash left.

        Orders taken in Redis but missing from the table are inserted (as cancelled when
        Redis has cancelled them); saved orders Redis has cancelled are marked cancelled.
        Rows ahead of Redis are reported as conflicts and left alone. With repair=False
        nothing is written. Safe while sales and sinks run (every write is idempotent);
        `after` is then a fresh snapshot that in-flight orders may unbalance briefly.
        """
        saved = await async_offload(self.table.saved, self.stock_name)
        on_sale, available, orders = await self._books()
        before = balance(on_sale, available, orders, saved)
        repairs = plan_repairs(orders, saved)
        if repair and repairs.write:
            # Orders set aside by the sink are tried again here: fixed since, they are saved.
            await self._apply_or_set_aside([(None, change) for change in repairs.write])
        saved = await async_offload(self.table.saved, self.stock_name)
        on_sale, available, orders = await self._books()
        after = balance(on_sale, available, orders, saved)
        conflicts = plan_repairs(orders, saved).conflicts
        aside = await self._set_aside_orders()
        resolved = [
            order for order in aside if order in saved and saved[order] == orders.get(order)
        ]
        if repair and resolved:
            await self._client.hdel(self.keys.dead, *resolved)
        unresolved = {o: e for o, e in aside.items() if o not in resolved}
        return ReconcileReport(
            stock=self.stock_name,
            before=before,
            after=after,
            inserted=tuple(order for order in repairs.inserted if order not in unresolved),
            cancelled=tuple(order for order in repairs.cancelled if order not in unresolved),
            conflicts=conflicts,
            repaired=repair,
            set_aside=tuple(sorted(unresolved.items())),
        )

    def saved_count(self, *, cancelled: bool | None = False) -> int:
        """Rows of this stock in the table (not cancelled by default; None: all)."""
        return self.table.count(self.stock_name, cancelled=cancelled)

    def close(self) -> None:
        """Close the database connection (the Redis client is the caller's)."""
        self.table.close()

    # -- Redis side -----------------------------------------------------------------------

    async def _ensure_group(self) -> None:
        if self._group_ready:
            return
        try:
            await self._client.xgroup_create(self.keys.log, self.group, id="0", mkstream=True)
        except redis.exceptions.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        self._group_ready = True

    async def _read(self, start: str, block: float | None) -> list[Any]:
        try:
            reply = await self._client.xreadgroup(
                self.group,
                self.consumer,
                {self.keys.log: start},
                count=self.batch,
                block=None if block is None else max(int(block * 1000), 1),
            )
        except redis.exceptions.ResponseError as exc:
            if "NOGROUP" in str(exc):  # the log or group was deleted (or Redis lost it)
                self._group_ready = False
                return []
            raise
        return _entries_of(reply)

    async def _claim(self) -> list[Any]:
        reply = await self._client.xautoclaim(
            self.keys.log,
            self.group,
            self.consumer,
            min_idle_time=int(self.claim_idle * 1000),
            start_id=self._claim_cursor,
            count=self.batch,
        )
        cursor = _scripts.reply_text(reply[0])
        self._claim_cursor = cursor
        if cursor == "0-0":  # scanned the whole pending list; look again later
            self._claim_due = _concurrency.monotonic() + self.claim_idle / 2
        return list(reply[1])

    async def _wait_for_abandoned(self) -> float | None:
        """None when nothing is pending; else seconds until the oldest may be claimed."""
        summary = await self._client.xpending(self.keys.log, self.group)
        if not summary or not summary.get("pending"):
            return None
        oldest = await self._client.xpending_range(
            self.keys.log, self.group, min="-", max="+", count=self.batch
        )
        idle = max((int(item["time_since_delivered"]) for item in oldest), default=0) / 1000
        self._claim_due = 0.0
        self._claim_cursor = "0-0"
        return max(self.claim_idle - idle, 0.0) + 0.01

    async def _pending_or_unknown(self) -> str:
        try:
            summary = await self._client.xpending(self.keys.log, self.group)
        except redis.exceptions.RedisError:
            return "unknown"
        return str(summary.get("pending", 0) if summary else 0)

    async def _set_aside_orders(self) -> dict[str, str]:
        """Order id -> the database's error, for every entry set aside on this stock."""
        found = await self._client.hgetall(self.keys.dead)
        aside = {}
        for order, record in found.items():
            try:
                error = str(json.loads(_scripts.reply_text(record)).get("error", ""))
            except (ValueError, AttributeError):
                error = _scripts.reply_text(record)
            aside[_scripts.reply_text(order)] = error
        return aside

    async def _books(self) -> tuple[int, int, dict[str, tuple[int, bool]]]:
        keys = self.keys
        on_sale, available, flat = await run_script(
            self._client, _BOOKS, (keys.onsale, keys.avail, keys.orders), ()
        )
        orders = {
            _scripts.reply_text(flat[i]): parse_order_value(flat[i + 1])
            for i in range(0, len(flat), 2)
        }
        return int(on_sale or 0), int(available or 0), orders

    # -- saving ---------------------------------------------------------------------------

    async def _save_if_any(self, entries: list[Any]) -> int:
        return await self._save(entries) if entries else 0

    async def _save(self, entries: list[Any]) -> int:
        ids = [_scripts.reply_text(entry_id) for entry_id, _ in entries]
        changes: list[tuple[str | None, OrderChange]] = []
        for entry_id, fields in entries:
            change = change_from_entry(fields)
            if change is not None:
                changes.append((_scripts.reply_text(entry_id), change))
            elif fields:
                log.warning(
                    "%r: log entry %s is not a take or cancel (%r); acknowledged without saving",
                    self,
                    _scripts.reply_text(entry_id),
                    fields,
                )
        self._hook("read", ids)
        if changes:
            try:
                await self._apply_or_set_aside(changes)
            except BaseException:
                self._own_pending = True  # they stay pending on us: retry them first
                raise
        self._hook("saved", ids)
        try:
            await run_script(
                self._client, _ACK, (self.keys.log,), (self.group, "1" if self.trim else "0", *ids)
            )
        except BaseException:
            self._own_pending = True
            raise
        if metrics_sink.enabled and ids:
            labels = (self.stock_name,)
            metrics_sink.count(ORDER_SINK_SAVED.name, labels, len(ids))
            # A log entry's id starts with the server's clock (ms) when it was added.
            newest_ms = int(ids[-1].split("-", 1)[0])
            metrics_sink.gauge(ORDER_SINK_LAG.name, labels, max(time.time() - newest_ms / 1000, 0))
        return len(ids)

    async def _apply_or_set_aside(self, changes: list[tuple[str | None, OrderChange]]) -> None:
        """Write `changes` in one transaction; if the database refuses a row of them, each
        in its own, and set aside the rows it still refuses. Other errors propagate."""
        try:
            await async_offload(self.table.apply, self.stock_name, [c for _, c in changes])
            return
        except self._row_errors as exc:
            if len(changes) == 1:
                await self._set_aside(*changes[0], exc)
                return
            log.warning(
                "%r: the database refused a batch of %d orders (%s); saving them one at a time",
                self,
                len(changes),
                _short(exc),
            )
        for entry_id, change in changes:
            try:
                await async_offload(self.table.apply, self.stock_name, [change])
            except self._row_errors as exc:
                await self._set_aside(entry_id, change, exc)

    async def _set_aside(
        self, entry_id: str | None, change: OrderChange, exc: BaseException
    ) -> None:
        """Keep an order the database refuses in the dead-letter hash (before its entry is
        acknowledged: a crash in between only sets it aside again), and say so loudly."""
        error = _short(exc)
        record = {
            "op": "cancel" if change.cancelled else "take",
            "qty": change.qty,
            "entry": entry_id,
            "error": error,
            "at": time.time(),
        }
        await self._client.hset(self.keys.dead, change.order_id, json.dumps(record))
        log.error(
            "%r: order %r (%s of %d units, log entry %s) cannot be saved, the "
            "database refuses it: %s. It is set aside in %s and the log goes on; fix the row "
            "or the table, then reconcile() saves it",
            self,
            change.order_id,
            record["op"],
            change.qty,
            entry_id,
            error,
            self.keys.dead,
        )

    def _hook(self, stage: str, ids: Sequence[str]) -> None:
        if self._checkpoint is not None:
            self._checkpoint(stage, ids)


def _short(exc: BaseException) -> str:
    """The database's own message, first line: SQLAlchemy adds the SQL and every parameter."""
    cause = getattr(exc, "orig", None) or exc
    text = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {text[0][:300] if text else ''}"


def _entries_of(reply: Any) -> list[Any]:
    """The entries of an XREADGROUP reply on one stream (RESP2 list or RESP3 dict)."""
    if not reply:
        return []
    if isinstance(reply, dict):  # RESP3: {stream: [entries]} or {stream: [[entries]]}
        found = next(iter(reply.values()), None) or []
        if found and isinstance(found[0], list) and found[0] and isinstance(found[0][0], list):
            found = found[0]
        return list(found)
    return list(reply[0][1])
