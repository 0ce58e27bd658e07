"""Pure order decisions: log entries to changes, reconcile plans, SQL text. No server."""

from __future__ import annotations

import pytest

from seawall.stock._orders import (
    Balance,
    OrderChange,
    apply_repairs,
    balance,
    change_from_entry,
    parse_order_value,
    plan_repairs,
)
from seawall.stock._sql import check_table_name, upsert_sql


def test_entries_become_changes_whatever_the_decoding() -> None:
    assert change_from_entry({b"op": b"take", b"order": b"o1", b"qty": b"2"}) == OrderChange(
        "o1", 2, False
    )
    assert change_from_entry({"op": "cancel", "order": "o1", "qty": "2"}) == OrderChange(
        "o1", 2, True
    )
    for bad in (
        None,
        {},
        {"op": "put", "order": "o", "qty": "1"},
        {"op": "take", "qty": "1"},
        {"op": "take", "order": "o", "qty": "x"},
        {"op": "take", "order": "o", "qty": "-1"},
    ):
        assert change_from_entry(bad) is None


def test_order_values() -> None:
    assert parse_order_value(b"3") == (3, False)
    assert parse_order_value("c3") == (3, True)


def test_repairs_move_rows_forward_only() -> None:
    redis_orders = {
        "a": (1, False),
        "b": (2, True),
        "c": (1, True),
        "d": (1, False),
        "e": (1, False),
        "f": (3, False),
    }
    saved = {"a": (1, False), "c": (1, False), "d": (1, True), "f": (2, False), "z": (1, False)}
    plan = plan_repairs(redis_orders, saved)
    assert plan.inserted == ("b", "e")
    assert plan.cancelled == ("c",)
    # d: cancelled in the table but taken in Redis; f: other qty; z: unknown to Redis.
    assert plan.conflicts == ("d", "f", "z")
    assert plan.write == (
        OrderChange("b", 2, True),
        OrderChange("c", 1, True),
        OrderChange("e", 1, False),
    )
    after = apply_repairs(saved, plan.write)
    assert after["b"] == (2, True) and after["c"] == (1, True) and after["e"] == (1, False)
    assert after["d"] == (1, True)  # never moved back


def test_a_cancel_before_its_take_ends_cancelled() -> None:
    changes = [OrderChange("a", 1, True), OrderChange("a", 1, False)]
    assert apply_repairs({}, changes) == {"a": (1, True)}


def test_balance_arithmetic() -> None:
    books = balance(100, 10, {"a": (80, False), "b": (5, True)}, {"a": (80, False)})
    assert books == Balance(on_sale=100, available=10, taken=80, saved=80)
    assert books.difference == 10 and books.redis_difference == 10
    assert balance(5, 3, {"a": (2, False)}, {"a": (2, False)}).difference == 0


def test_sql_is_idempotent_per_dialect() -> None:
    assert upsert_sql("t", "postgresql", cancel=False).endswith(
        "ON CONFLICT (stock, order_id) DO NOTHING"
    )
    assert upsert_sql("t", "sqlite", cancel=True).endswith("DO UPDATE SET cancelled = 1")
    assert upsert_sql("t", "mysql", cancel=True).endswith("ON DUPLICATE KEY UPDATE cancelled = 1")
    for bad in ("", "1t", "t;drop", "a-b", "x" * 64, None):
        with pytest.raises(ValueError, match="table name"):
            check_table_name(bad)
