"""seawall.Stock and seawall.aio.Stock against real servers: one server and the 3+3 cluster.

Each test body is written once against the asyncio API; in the sync world it drives
seawall.Stock through a thin wrapper that only awaits nothing, so both twins run the same
checks. Redis state is inspected with a separate sync client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import redis
import redis.asyncio
from conftest import Target
from redis.crc import key_slot

import seawall
import seawall.aio
from seawall.stock._stock import MAX_ORDER_ID_BYTES

Body = Callable[[Any], Awaitable[None]]


class _AwaitableStock:
    """seawall.Stock with coroutine methods, so one test body serves both worlds."""

    def __init__(self, stock: seawall.Stock) -> None:
        self._stock = stock
        self.name = stock.name
        self.keys = stock.keys

    def __getattr__(self, method: str) -> Callable[..., Awaitable[Any]]:
        call = getattr(self._stock, method)

        async def awaitable(*args: Any, **kwargs: Any) -> Any:
            return call(*args, **kwargs)

        return awaitable


def run_stock(target: Target, world: str, body: Body, name: str = "sku:1001", **kw: Any) -> None:
    async def main() -> None:
        if world == "sync":
            await body(_AwaitableStock(seawall.Stock(target.sync(**kw), name)))
            return
        r = target.aio(**kw)
        try:
            await body(seawall.aio.Stock(r, name))
        finally:
            await r.aclose()

    asyncio.run(main())


def events(target: Target, stock: Any) -> list[tuple[str, str, int]]:
    """The order log as (op, order, qty), oldest first."""
    entries = target.sync().xrange(stock.keys.log)
    return [(f[b"op"].decode(), f[b"order"].decode(), int(f[b"qty"])) for _, f in entries]


def orders(target: Target, stock: Any) -> dict[str, str]:
    raw = target.sync().hgetall(stock.keys.orders)
    return {k.decode(): v.decode() for k, v in raw.items()}


def counters(target: Target, stock: Any) -> tuple[int, int, int]:
    """(on sale, available, taken), read directly from the keys."""
    r = target.sync()
    keys = stock.keys
    return int(r.get(keys.onsale)), int(r.get(keys.avail)), int(r.get(keys.taken))


# --- the contract ---------------------------------------------------------------------


def test_take_records_logs_and_counts(target: Target, world: str) -> None:
    async def body(stock: Any) -> None:
        await stock.put(10)
        assert await stock.available() == 10
        assert await stock.take("o-1") is True
        assert await stock.take(2, qty=3) is True
        assert await stock.available() == 6
        assert await stock.taken() == 4
        assert await stock.order("o-1") == 1
        assert await stock.order("2") == 3  # an int id and its decimal string are one order
        assert await stock.order("nobody") is None
        assert counters(target, stock) == (10, 6, 4)
        assert orders(target, stock) == {"o-1": "1", "2": "3"}
        assert events(target, stock) == [("take", "o-1", 1), ("take", "2", 3)]

    run_stock(target, world, body)


def test_keys_follow_the_contract_and_share_a_slot(target: Target, world: str) -> None:
    async def body(stock: Any) -> None:
        await stock.put(5)
        await stock.take("a")
        base = "seawall:stock:{sku:1001}"
        names = {f"{base}:{s}" for s in ("avail", "onsale", "taken", "orders", "log")}
        assert set(target.keys()) == names
        assert len({key_slot(k.encode()) for k in names}) == 1
        assert stock.name == "sku:1001"

    run_stock(target, world, body)


def test_retried_take_never_takes_twice(target: Target, world: str) -> None:
    async def body(stock: Any) -> None:
        await stock.put(3)
        assert await stock.take("o-1", 2) is True
        for _ in range(3):
            assert await stock.take("o-1", 2) is True
        assert await stock.available() == 1
        assert events(target, stock) == [("take", "o-1", 2)]
        # Another qty under the same id is a conflict, not a retry: refused, nothing taken.
        with pytest.raises(seawall.OrderConflictError, match="'o-1' already took 2 units"):
            await stock.take("o-1", 1)
        assert await stock.available() == 1

    run_stock(target, world, body)


def test_failed_order_may_take_later_but_a_cancelled_one_never(target: Target, world: str) -> None:
    async def body(stock: Any) -> None:
        await stock.put(2)
        assert await stock.take("a", 2) is True
        assert await stock.take("b") is False  # sold out: b took nothing
        assert await stock.order("b") is None
        assert await stock.cancel("a") is True
        assert await stock.available() == 2
        assert await stock.cancel("a") is False  # given back once only
        assert await stock.take("a", 2) is False  # a retry after the cancel never takes
        assert await stock.order("a") is None
        assert await stock.take("b") is True  # b never took, so it may now
        assert await stock.cancel("unknown") is False
        assert counters(target, stock) == (2, 1, 1)
        assert orders(target, stock) == {"a": "c2", "b": "1"}
        assert events(target, stock) == [("take", "a", 2), ("cancel", "a", 2), ("take", "b", 1)]

    run_stock(target, world, body)


def test_put_keeps_what_orders_hold(target: Target, world: str) -> None:
    async def body(stock: Any) -> None:
        await stock.put(5)
        await stock.take("a", 3)
        await stock.put(8)
        assert counters(target, stock) == (8, 5, 3)
        await stock.put(3)
        assert counters(target, stock) == (3, 0, 3)
        assert await stock.take("b") is False
        await stock.cancel("a")
        await stock.put(0)
        assert counters(target, stock) == (0, 0, 0)
        assert [op for op, _, _ in events(target, stock)] == ["take", "cancel"]

    run_stock(target, world, body)


def test_before_any_put(target: Target, world: str) -> None:
    async def body(stock: Any) -> None:
        assert await stock.available() == 0
        assert await stock.taken() == 0
        with pytest.raises(seawall.StockQuantityError, match=r"0 units on sale.*call put"):
            await stock.take("a")
        assert await stock.cancel("a") is False
        assert target.keys() == []

    run_stock(target, world, body)


def test_decoding_clients_work(target: Target, world: str) -> None:
    async def body(stock: Any) -> None:
        await stock.put(4)
        assert await stock.take("ü-1", 2) is True
        assert await stock.order("ü-1") == 2
        assert await stock.available() == 2
        assert await stock.cancel("ü-1") is True
        assert await stock.order("ü-1") is None

    run_stock(target, world, body, decode_responses=True)


# --- acceptance 6: bad input is refused, and changes nothing --------------------------------


def _snapshot(target: Target, stock: Any) -> dict[str, bytes | None]:
    r = target.sync()
    keys = stock.keys
    return {k: r.dump(k) for k in (keys.avail, keys.onsale, keys.taken, keys.orders, keys.log)}


BAD_CALLS: list[tuple[str, tuple[Any, ...], type[Exception], str]] = [
    ("take", ("x", 0), ValueError, ">= 1"),
    ("take", ("x", -2), ValueError, ">= 1"),
    ("take", ("x", True), TypeError, "must be an int"),
    ("take", ("x", 1.0), TypeError, "must be an int"),
    ("take", ("x", 11), seawall.StockQuantityError, "10 units on sale in total"),
    ("take", ("o-1", 2), seawall.OrderConflictError, "already took 1 units"),
    ("take", ("", 1), ValueError, "must not be empty"),
    ("take", ("x" * (MAX_ORDER_ID_BYTES + 1), 1), ValueError, "at most 191 bytes"),
    ("take", (None, 1), TypeError, "str or an int"),
    ("cancel", ("",), ValueError, "must not be empty"),
    ("cancel", (b"o-1",), TypeError, "str or an int"),
    ("put", ("20",), TypeError, "must be an int"),
    ("put", (12.0,), TypeError, "must be an int"),
    ("put", (-1,), ValueError, ">= 0"),
    ("put", (None,), TypeError, "must be an int"),
    ("put", (3,), seawall.StockQuantityError, "already taken 4 units; put at least 4"),
]


def test_bad_input_raises_and_changes_nothing(target: Target, world: str) -> None:
    async def body(stock: Any) -> None:
        await stock.put(10)
        await stock.take("o-1")
        await stock.take("o-2", 3)
        await stock.cancel("o-2")
        await stock.take("o-3", 3)
        before = _snapshot(target, stock)
        assert all(value is not None for value in before.values())
        for method, args, error, words in BAD_CALLS:
            with pytest.raises(error, match=words) as raised:
                await getattr(stock, method)(*args)
            assert "'sku:1001'" in str(raised.value), str(raised.value)
            assert _snapshot(target, stock) == before, f"{method}{args} changed the stock"
        assert await stock.available() == 6

    run_stock(target, world, body)


def test_constructor_checks_its_arguments() -> None:
    client = redis.Redis()  # never connected: construction does no I/O
    with pytest.raises(TypeError, match=r"seawall\.aio\.Stock"):
        seawall.Stock(redis.asyncio.Redis(), "s")
    with pytest.raises(TypeError, match=r"seawall\.Stock"):
        seawall.aio.Stock(client, "s")
    with pytest.raises(ValueError, match="must not be empty"):
        seawall.Stock(client, "")
    with pytest.raises(TypeError, match="name must be a str"):
        seawall.Stock(client, 5)  # type: ignore[arg-type]
    assert repr(seawall.Stock(client, "s")) == "<seawall.Stock 's'>"
