"""Stock rules with no I/O: argument checks and the meaning of the scripts' replies.

The scripts answer with a code and one number; what each code means for the caller
(True, False or which error) is decided here, so it is unit-tested without a server.
"""

from __future__ import annotations

from typing import Any

from seawall.errors import (
    OrderConflictError,
    StockCounterLostError,
    StockError,
    StockQuantityError,
)
from seawall.shared._scripts import reply_text

# Redis counts in 64-bit integers but Lua compares in doubles, exact up to 2**53: stay
# well below it so no comparison inside a script can round.
MAX_UNITS = 10**15
# Order ids are hash fields and stream values, kept short enough to log and index, and
# to fit the orders table's VARCHAR(191) (seawall.stock._sql): at most 191 bytes of UTF-8 is at
# most 191 characters, so every id a take accepts is one an OrderSink can save.
MAX_ORDER_ID_BYTES = 191

# Codes the stock scripts return first (see the headers in seawall/stock/stock_*.lua).
TAKEN = 1
TAKEN_BEFORE = 2
SOLD_OUT = 0
CANCELLED_BEFORE = -1
OVER_ON_SALE = -2
OTHER_QTY = -3
UNKNOWN_ORDER = 0
CANCELLED = 1
PUT = 1
BELOW_TAKEN = -1
COUNTER_LOST = -2


def check_units(units: Any, stock_name: str) -> int:
    """The number of units put() sets on sale: an int from 0 to MAX_UNITS (not a bool)."""
    if isinstance(units, bool) or not isinstance(units, int):
        raise TypeError(
            f"units put on sale in stock {stock_name!r} must be an int, got "
            f"{type(units).__qualname__}: {units!r}"
        )
    if not 0 <= units <= MAX_UNITS:
        raise ValueError(
            f"units put on sale in stock {stock_name!r} must be >= 0 and <= {MAX_UNITS:,}, "
            f"got {units!r}"
        )
    return units


def check_qty(qty: Any, stock_name: str) -> int:
    """The units one order takes: an int from 1 to MAX_UNITS (not a bool)."""
    if isinstance(qty, bool) or not isinstance(qty, int):
        raise TypeError(
            f"qty of an order on stock {stock_name!r} must be an int, got "
            f"{type(qty).__qualname__}: {qty!r}"
        )
    if not 1 <= qty <= MAX_UNITS:
        raise ValueError(
            f"qty of an order on stock {stock_name!r} must be >= 1 and <= {MAX_UNITS:,}, "
            f"got {qty!r}"
        )
    return qty


def check_order_id(order_id: Any, stock_name: str) -> str:
    """The order id as stored: a non-empty str, or an int (7 and "7" are the same order)."""
    if isinstance(order_id, int) and not isinstance(order_id, bool):
        text = str(order_id)
    elif isinstance(order_id, str):
        text = order_id
    else:
        raise TypeError(
            f"order id on stock {stock_name!r} must be a str or an int, got "
            f"{type(order_id).__qualname__}: {order_id!r}"
        )
    if not text:
        raise ValueError(f"order id on stock {stock_name!r} must not be empty")
    if text.isascii() and len(text) <= MAX_ORDER_ID_BYTES:
        # The usual id: one byte per character and no surrogates, known without encoding.
        return text
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError(
            f"order id on stock {stock_name!r} must be valid text (no lone surrogates), "
            f"got {text[:40]!r}"
        ) from None
    if size > MAX_ORDER_ID_BYTES:
        raise ValueError(
            f"order id on stock {stock_name!r} must be at most {MAX_ORDER_ID_BYTES} bytes "
            f"in UTF-8, got {size} bytes ({text[:40]!r}...): use a shorter id, such as the "
            "order's primary key or a hash of it"
        )
    return text


def _pair(reply: Any) -> tuple[int, int]:
    code, value = reply
    return int(code), int(value)


def take_outcome(reply: Any, stock_name: str, order_id: str, qty: int) -> bool:
    """True when the order holds its units (now or from an earlier try), False when not."""
    # The usual answers are a bare integer; the errors carry a number for their message.
    if isinstance(reply, int):
        if reply in (TAKEN, TAKEN_BEFORE):
            return True
        if reply in (SOLD_OUT, CANCELLED_BEFORE):
            return False
        code, value = reply, 0
    else:
        code, value = _pair(reply)
    if code == OVER_ON_SALE:
        hint = "call put() first" if value == 0 else "ask for fewer units"
        raise StockQuantityError(
            f"order {order_id!r} asks for {qty} units of stock {stock_name!r}, which has "
            f"{value} units on sale in total: {hint}",
            stock_name=stock_name,
        )
    if code == OTHER_QTY:
        raise OrderConflictError(
            f"order {order_id!r} already took {value} units of stock {stock_name!r} and is "
            f"now asked for {qty}: give each order its own id, and retry an order with its "
            "original qty",
            stock_name=stock_name,
        )
    raise StockError(f"unexpected reply {reply!r} from the take script", stock_name=stock_name)


def cancel_outcome(reply: Any, stock_name: str) -> bool:
    """True when this call gave the order's units back, False when there was nothing to give."""
    code, _ = _pair(reply)
    if code == CANCELLED:
        return True
    if code in (UNKNOWN_ORDER, CANCELLED_BEFORE):
        return False
    raise StockError(f"unexpected reply {reply!r} from the cancel script", stock_name=stock_name)


def put_outcome(reply: Any, stock_name: str, units: int) -> None:
    code, value = _pair(reply)
    if code == PUT:
        return
    if code == BELOW_TAKEN:
        raise StockQuantityError(
            f"cannot put {units} units on sale in stock {stock_name!r}: orders have already "
            f"taken {value} units; put at least {value}, or cancel orders first",
            stock_name=stock_name,
        )
    if code == COUNTER_LOST:
        raise StockCounterLostError(
            f"cannot put units on sale in stock {stock_name!r}: its taken counter (the "
            f"units orders hold) is gone from Redis while its orders hash records {value} "
            f"orders, so Redis lost data (eviction under an allkeys-* maxmemory-policy, a "
            "FLUSH, a partial restore); rebuilding from 0 taken would sell the units those "
            "orders hold again. Nothing was changed. To recover: check the orders hash "
            "against your saved orders with OrderSink.reconcile(repair=False) (conflicts "
            "mean orders are missing from Redis too), then call put(units, recount=True), "
            "which recounts the units taken from the orders hash; and make the server "
            "stop evicting (maxmemory-policy noeviction, see docs/eviction.md)",
            stock_name=stock_name,
        )
    raise StockError(f"unexpected reply {reply!r} from the put script", stock_name=stock_name)


def count(value: Any) -> int:
    """A counter key's value; a missing key counts 0."""
    return 0 if value is None else int(value)


def order_qty(value: Any) -> int | None:
    """An orders-hash value as the units the order holds: None if unknown or cancelled."""
    if value is None:
        return None
    text = reply_text(value)
    return None if text.startswith("c") else int(text)
