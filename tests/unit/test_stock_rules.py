"""Stock argument checks, reply decoding and key naming, without a server."""

from __future__ import annotations

from typing import Any

import pytest
from redis.crc import key_slot

from seawall.errors import OrderConflictError, StockError, StockQuantityError
from seawall.shared._keys import stock_keys
from seawall.stock import _stock


def test_keys_share_one_slot_and_follow_the_contract() -> None:
    keys = stock_keys("sku:1001")
    assert keys.avail == "seawall:stock:{sku:1001}:avail"
    assert keys.onsale == "seawall:stock:{sku:1001}:onsale"
    assert keys.taken == "seawall:stock:{sku:1001}:taken"
    assert keys.orders == "seawall:stock:{sku:1001}:orders"
    assert keys.log == "seawall:stock:{sku:1001}:log"
    all_keys = (keys.avail, keys.onsale, keys.taken, keys.orders, keys.log)
    assert len({key_slot(k.encode()) for k in all_keys}) == 1


@pytest.mark.parametrize("qty", [1, 7, _stock.MAX_UNITS])
def test_valid_qty(qty: int) -> None:
    assert _stock.check_qty(qty, "s") == qty


@pytest.mark.parametrize(
    ("qty", "error", "words"),
    [
        (0, ValueError, ">= 1"),
        (-3, ValueError, ">= 1"),
        (_stock.MAX_UNITS + 1, ValueError, "<= "),
        (True, TypeError, "must be an int"),
        (1.0, TypeError, "must be an int"),
        ("1", TypeError, "must be an int"),
        (None, TypeError, "must be an int"),
    ],
)
def test_bad_qty(qty: Any, error: type[Exception], words: str) -> None:
    with pytest.raises(error, match=words) as raised:
        _stock.check_qty(qty, "sku:9")
    assert "'sku:9'" in str(raised.value)


@pytest.mark.parametrize(
    ("units", "error"),
    [(-1, ValueError), (_stock.MAX_UNITS + 1, ValueError), (False, TypeError), (2.5, TypeError),
     ("10", TypeError)],
)  # fmt: skip
def test_bad_units(units: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match="'sku:9'"):
        _stock.check_units(units, "sku:9")


def test_zero_units_may_be_put() -> None:
    assert _stock.check_units(0, "s") == 0


@pytest.mark.parametrize(
    ("order_id", "stored"),
    [("o-1", "o-1"), (42, "42"), (-5, "-5"), ("x" * 191, "x" * 191), ("é" * 95, "é" * 95)],
)
def test_valid_order_ids(order_id: Any, stored: str) -> None:
    assert _stock.check_order_id(order_id, "s") == stored


@pytest.mark.parametrize(
    ("order_id", "error", "words"),
    [
        ("", ValueError, "empty"),
        ("x" * 192, ValueError, "at most 191 bytes"),
        ("é" * 96, ValueError, "at most 191 bytes"),
        (10**191, ValueError, "at most 191 bytes"),
        ("\ud800", ValueError, "surrogates"),
        (True, TypeError, "str or an int"),
        (b"o-1", TypeError, "str or an int"),
        (None, TypeError, "str or an int"),
        (1.5, TypeError, "str or an int"),
    ],
)
def test_bad_order_ids(order_id: Any, error: type[Exception], words: str) -> None:
    with pytest.raises(error, match=words):
        _stock.check_order_id(order_id, "s")


@pytest.mark.parametrize(
    ("reply", "outcome"),
    [(1, True), (2, True), (0, False), (-1, False)],
)
def test_take_outcomes(reply: Any, outcome: bool) -> None:
    assert _stock.take_outcome(reply, "s", "o", 1) is outcome


def test_take_errors_name_stock_and_order() -> None:
    with pytest.raises(StockQuantityError, match=r"'o-7'.*5 units.*'sku'.*3 units on sale"):
        _stock.take_outcome([-2, 3], "sku", "o-7", 5)
    with pytest.raises(StockQuantityError, match="call put"):
        _stock.take_outcome([-2, 0], "sku", "o-7", 5)
    with pytest.raises(OrderConflictError, match="already took 2 units") as raised:
        _stock.take_outcome([-3, 2], "sku", "o-7", 5)
    assert raised.value.stock_name == "sku"
    with pytest.raises(StockError, match="unexpected"):
        _stock.take_outcome([9, 0], "sku", "o-7", 5)
    with pytest.raises(StockError, match="unexpected"):
        _stock.take_outcome(9, "sku", "o-7", 5)


def test_cancel_and_put_outcomes() -> None:
    assert _stock.cancel_outcome([1, 4], "s") is True
    assert _stock.cancel_outcome([0, 0], "s") is False
    assert _stock.cancel_outcome([-1, 0], "s") is False
    _stock.put_outcome([1, 0], "s", 10)
    with pytest.raises(StockQuantityError, match="already taken 7 units; put at least 7"):
        _stock.put_outcome([-1, 7], "s", 5)


def test_stored_values() -> None:
    assert _stock.count(None) == 0
    assert _stock.count(b"12") == 12
    assert _stock.order_qty(None) is None
    assert _stock.order_qty(b"3") == 3
    assert _stock.order_qty("3") == 3
    assert _stock.order_qty(b"c3") is None
