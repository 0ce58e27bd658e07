"""Orders between Redis and SQL, as pure decisions: no I/O here.

A `Stock` records every take and cancel twice in one atomic script: in its orders hash
(order id -> "<qty>", or "c<qty>" once cancelled) and as an entry of its log stream. The
sink turns log entries into `OrderChange`s that the SQL table applies idempotently; the
reconciler compares the orders hash with the saved rows and decides what to repair. An
order only ever moves forward (absent -> taken -> cancelled), so every repair moves a row
forward and none ever moves one back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from seawall.shared._scripts import reply_text


@dataclass(frozen=True, slots=True)
class OrderChange:
    """One row's target state: `qty` units of `order_id`, cancelled or not."""

    order_id: str
    qty: int
    cancelled: bool


def change_from_entry(fields: Mapping[Any, Any] | None) -> OrderChange | None:
    """The change a log entry asks for; None for an entry that is not a take or cancel.

    `fields` comes from XREADGROUP/XAUTOCLAIM as bytes or str, decoded or not; an entry
    deleted while it was pending arrives as None.
    """
    if not fields:
        return None
    decoded = {reply_text(key): reply_text(value) for key, value in fields.items()}
    op, order_id, qty = decoded.get("op"), decoded.get("order"), decoded.get("qty")
    if op not in ("take", "cancel") or not order_id or qty is None:
        return None
    try:
        units = int(qty)
    except ValueError:
        return None
    if units < 0:
        return None
    return OrderChange(order_id, units, op == "cancel")


def parse_order_value(value: Any) -> tuple[int, bool]:
    """An orders-hash value as (qty, cancelled): "3" -> (3, False), "c3" -> (3, True)."""
    text = reply_text(value)
    if text.startswith("c"):
        return int(text[1:]), True
    return int(text), False


@dataclass(frozen=True, slots=True)
class Balance:
    """One snapshot of a stock's books.

    on_sale: units put on sale; available: units left in Redis; taken: units of orders
    Redis holds as taken (not cancelled); saved: units of saved, not cancelled rows.
    The books balance when on_sale == available + saved.
    """

    on_sale: int
    available: int
    taken: int
    saved: int

    @property
    def difference(self) -> int:
        """Units on sale that are neither available nor in a saved order (0 = balanced).

        Positive: orders taken in Redis but not saved yet (a sink behind or a crash
        between take and save). Negative: saved orders Redis no longer counts.
        """
        return self.on_sale - self.available - self.saved

    @property
    def redis_difference(self) -> int:
        """on_sale - available - taken: nonzero only if Redis itself lost writes."""
        return self.on_sale - self.available - self.taken


def balance(
    on_sale: int,
    available: int,
    redis_orders: Mapping[str, tuple[int, bool]],
    saved: Mapping[str, tuple[int, bool]],
) -> Balance:
    taken = sum(qty for qty, cancelled in redis_orders.values() if not cancelled)
    kept = sum(qty for qty, cancelled in saved.values() if not cancelled)
    return Balance(on_sale=on_sale, available=available, taken=taken, saved=kept)


@dataclass(frozen=True, slots=True)
class Repairs:
    """What reconciling decided: rows to write, and conflicts it must not touch.

    `write` holds rows to insert (orders Redis has that the table lacks) and rows to mark
    cancelled; `conflicts` holds order ids where the table is ahead of Redis (a saved
    order Redis does not know, or knows as still taken while the row is cancelled, or
    with another quantity). Those mean Redis lost acknowledged writes (a restart without
    appendfsync always, a failover to a lagging replica); no automatic repair is right
    for them, so they are reported for a person to decide.
    """

    write: tuple[OrderChange, ...] = ()
    inserted: tuple[str, ...] = ()
    cancelled: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = field(default_factory=tuple)


def plan_repairs(
    redis_orders: Mapping[str, tuple[int, bool]], saved: Mapping[str, tuple[int, bool]]
) -> Repairs:
    """Move every saved row forward to what Redis says; never move one back.

    Read the table BEFORE the orders hash: every saved row then comes from an order the
    hash snapshot already holds (a take is recorded in Redis before the sink can save
    it), so a row ahead of the snapshot is a real conflict, never a race with the sink.
    """
    write: list[OrderChange] = []
    inserted: list[str] = []
    cancelled: list[str] = []
    conflicts: list[str] = []
    for order_id, (qty, gone) in sorted(redis_orders.items()):
        row = saved.get(order_id)
        if row is None:
            write.append(OrderChange(order_id, qty, gone))
            inserted.append(order_id)
        elif row[0] != qty or (row[1] and not gone):
            conflicts.append(order_id)
        elif gone and not row[1]:
            write.append(OrderChange(order_id, qty, True))
            cancelled.append(order_id)
    conflicts.extend(order_id for order_id in sorted(saved) if order_id not in redis_orders)
    return Repairs(tuple(write), tuple(inserted), tuple(cancelled), tuple(conflicts))


def apply_repairs(
    saved: Mapping[str, tuple[int, bool]], changes: Iterable[OrderChange]
) -> dict[str, tuple[int, bool]]:
    """The table as it is after `changes` were applied with the sink's idempotent rules."""
    result = dict(saved)
    for change in changes:
        current = result.get(change.order_id)
        if current is None:
            result[change.order_id] = (change.qty, change.cancelled)
        elif change.cancelled:
            result[change.order_id] = (current[0], True)
    return result


@dataclass(frozen=True, slots=True)
class ReconcileReport:
    """What `OrderSink.reconcile()` found and did.

    before/after: the books as read before and after the repairs. inserted: orders Redis
    holds that the table lacked (written now, cancelled ones as cancelled). cancelled:
    saved orders Redis had cancelled (marked now). conflicts: rows ahead of Redis, left
    alone (see `Repairs`). set_aside: (order id, error) of orders the database refuses
    (the sink set their log entries aside, and a retry now failed again): a person must
    fix the row or the table. `balanced` is the proof: after the repairs, units on sale =
    units available + units in saved orders, and no conflict remains.
    """

    stock: str
    before: Balance
    after: Balance
    inserted: tuple[str, ...]
    cancelled: tuple[str, ...]
    conflicts: tuple[str, ...]
    repaired: bool
    set_aside: tuple[tuple[str, str], ...] = ()

    @property
    def balanced(self) -> bool:
        return (
            self.after.difference == 0 and self.after.redis_difference == 0 and not (self.conflicts)
        )

    def __str__(self) -> str:
        def books(b: Balance) -> str:
            return (
                f"on sale {b.on_sale} = available {b.available} + saved {b.saved} "
                f"{'+' if b.difference >= 0 else '-'} {abs(b.difference)} (Redis holds "
                f"{b.taken} taken)"
            )

        verb = "repaired" if self.repaired else "would repair"
        return (
            f"stock {self.stock!r}: before: {books(self.before)}; after: {books(self.after)}; "
            f"{verb} {len(self.inserted)} missing and {len(self.cancelled)} cancelled "
            f"order(s); {len(self.conflicts)} conflict(s)"
            + ("" if self.balanced else " - NOT balanced")
            + "".join(
                f"\n  set aside, the database refuses it: order {order_id!r} ({error})"
                for order_id, error in self.set_aside
            )
        )
