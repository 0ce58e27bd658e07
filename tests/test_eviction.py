"""Eviction: a server that may evict seawall's coordination keys is named in a warning, once
per client; Stock.put refuses to rebuild its books from a lost `taken` counter.

Real servers: each test that changes maxmemory-policy does it on a private server (or
restores it on the session cluster).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest
import redis
import redis.asyncio

import seawall
import seawall.aio
from seawall.launcher import ServerProcess

Factory = Callable[..., ServerProcess]


def _eviction_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "seawall" and "maxmemory-policy" in r.message]


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in _eviction_records(caplog) if r.levelno >= logging.WARNING]


def _use_every_family(r: redis.Redis) -> None:
    lock = seawall.Lock(r, "evict:lock", ttl=5.0)
    with lock:
        pass
    with lock:
        pass
    with seawall.Semaphore(r, "evict:sem", value=2, ttl=5.0):
        pass
    with seawall.RWLock(r, "evict:rw", ttl=5.0).write():
        pass
    stock = seawall.Stock(r, "evict:stock")
    stock.put(10)
    assert stock.take("o-1")
    assert seawall.Idempotent(r, "evict:idem").run("m-1", lambda: 1) == 1
    bloom = seawall.BloomFilter(r, "evict:bloom", 100)
    bloom.create()
    bloom.add("x")


@pytest.mark.parametrize("policy", ["allkeys-lru", "allkeys-lfu", "allkeys-random"])
def test_allkeys_policy_is_warned_once_per_client(
    seawall_server_factory: Factory, caplog: pytest.LogCaptureFixture, policy: str
) -> None:
    server = seawall_server_factory()
    r = server.client()
    r.config_set("maxmemory-policy", policy)
    caplog.set_level(logging.DEBUG, logger="seawall")
    _use_every_family(r)
    warnings = _warnings(caplog)
    assert len(warnings) == 1, warnings
    message = warnings[0]
    assert f"maxmemory-policy {policy}" in message
    assert f"127.0.0.1:{server.port}" in message
    assert "maxmemory-policy noeviction" in message  # the fix
    assert "separate Redis" in message  # the other fix
    # A second client on the same server is checked (and warned about) on its own.
    other = server.client()
    seawall.Stock(other, "evict:stock").take("o-2")
    assert len(_warnings(caplog)) == 2
    r.close()
    other.close()


def test_volatile_policy_names_the_keys_with_a_ttl(
    seawall_server_factory: Factory, caplog: pytest.LogCaptureFixture
) -> None:
    server = seawall_server_factory()
    r = server.client()
    r.config_set("maxmemory-policy", "volatile-lru")
    caplog.set_level(logging.WARNING, logger="seawall")
    _use_every_family(r)
    warnings = _warnings(caplog)
    assert len(warnings) == 1, warnings
    assert "maxmemory-policy volatile-lru" in warnings[0]
    assert "lock" in warnings[0] and "Idempotent" in warnings[0]  # keys with a TTL
    assert "maxmemory-policy noeviction" in warnings[0]
    r.close()


def test_noeviction_is_checked_and_not_warned(
    seawall_server_factory: Factory, caplog: pytest.LogCaptureFixture
) -> None:
    server = seawall_server_factory()
    r = server.client()
    assert "noeviction" in str(r.config_get("maxmemory-policy"))
    caplog.set_level(logging.DEBUG, logger="seawall")
    _use_every_family(r)
    assert _warnings(caplog) == []
    # It was checked (so the absence of a warning means something), and once.
    checked = [r.getMessage() for r in _eviction_records(caplog)]
    assert len(checked) == 1 and "noeviction" in checked[0], checked
    r.close()


def test_async_clients_are_warned_once(
    seawall_server_factory: Factory, caplog: pytest.LogCaptureFixture
) -> None:
    server = seawall_server_factory()
    server.client().config_set("maxmemory-policy", "allkeys-lru")
    caplog.set_level(logging.WARNING, logger="seawall")

    async def main() -> None:
        r = redis.asyncio.Redis.from_url(server.url)
        lock = seawall.aio.Lock(r, "evict:lock", ttl=5.0)
        for _ in range(2):
            async with lock:
                pass
        stock = seawall.aio.Stock(r, "evict:stock")
        await stock.put(5)
        await asyncio.gather(*(stock.take(f"o-{i}") for i in range(5)))
        await r.aclose()

    asyncio.run(main())
    warnings = _warnings(caplog)
    assert len(warnings) == 1 and "allkeys-lru" in warnings[0], warnings


def test_denied_config_is_noted_at_debug_once(
    seawall_server_factory: Factory, caplog: pytest.LogCaptureFixture
) -> None:
    server = seawall_server_factory()
    admin = server.client()
    admin.config_set("maxmemory-policy", "allkeys-lru")
    # An application user that may run everything but CONFIG (as managed services do).
    admin.execute_command("ACL", "SETUSER", "app", "on", ">pw", "~*", "&*", "+@all", "-config")
    r = redis.Redis(host="127.0.0.1", port=server.port, username="app", password="pw")
    caplog.set_level(logging.DEBUG, logger="seawall")
    _use_every_family(r)
    records = _eviction_records(caplog)
    assert [r.levelno for r in records] == [logging.DEBUG], records
    assert "could not be checked" in records[0].getMessage()
    r.close()
    admin.close()


def test_cluster_checks_every_primary(
    seawall_cluster: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # Only the last primary evicts: a check of one node (the first) would miss it.
    last = seawall_cluster.masters[-1]
    node = last.client()
    node.config_set("maxmemory-policy", "allkeys-lfu")
    try:
        caplog.set_level(logging.WARNING, logger="seawall")
        r = seawall_cluster.client()
        seawall.Stock(r, "evict:stock").put(3)
        seawall.Lock(r, "evict:lock").acquire()
        warnings = _warnings(caplog)
        assert len(warnings) == 1, warnings
        assert "allkeys-lfu" in warnings[0] and str(last.port) in warnings[0]
        r.close()
    finally:
        node.config_set("maxmemory-policy", "noeviction")
        node.close()


# -- Stock.put and a lost `taken` counter -----------------------------------------------


def test_put_refuses_to_rebuild_from_a_lost_taken_counter(seawall_redis: redis.Redis) -> None:
    stock = seawall.Stock(seawall_redis, "sku:evicted")
    stock.put(10)
    for i in range(7):
        assert stock.take(f"o-{i}")
    assert stock.cancel("o-0")
    # What eviction under allkeys-* (or a partial loss) does to the counter.
    seawall_redis.delete(stock.keys.taken)
    books = {k: seawall_redis.get(getattr(stock.keys, k)) for k in ("avail", "onsale")}
    with pytest.raises(seawall.StockError, match=r"taken.*7 orders.*reconcile") as caught:
        stock.put(10)
    assert isinstance(caught.value, seawall.StockCounterLostError)
    # Nothing changed: put would have made all 10 units available again (6 oversold).
    assert {k: seawall_redis.get(getattr(stock.keys, k)) for k in books} == books
    assert seawall_redis.get(stock.keys.taken) is None
    # The recovery: recount the units orders hold from the orders hash.
    stock.put(10, recount=True)
    assert stock.taken() == 6 and stock.available() == 4
    for i in range(7, 11):
        assert stock.take(f"o-{i}")
    assert not stock.take("o-11")


def test_async_put_refuses_too(seawall_url: str) -> None:
    async def main() -> None:
        r = redis.asyncio.Redis.from_url(seawall_url, decode_responses=True)
        stock = seawall.aio.Stock(r, "sku:evicted")
        await stock.put(3)
        assert await stock.take("a", qty=2)
        await r.delete(stock.keys.taken)
        with pytest.raises(seawall.aio.StockError, match="lost") as caught:
            await stock.put(3)
        assert isinstance(caught.value, seawall.aio.StockCounterLostError)
        await stock.put(3, recount=True)
        assert await stock.taken() == 2 and await stock.available() == 1
        await r.aclose()

    asyncio.run(main())


def test_put_without_orders_starts_from_zero(seawall_redis: redis.Redis) -> None:
    # No order was ever recorded: a missing counter is a new stock, not a loss.
    stock = seawall.Stock(seawall_redis, "sku:new")
    stock.put(5)
    assert stock.available() == 5 and stock.taken() == 0


def test_sentinel_managed_client_is_checked_on_its_master(
    seawall_sentinel: Any, caplog: pytest.LogCaptureFixture
) -> None:
    r = seawall_sentinel.master_client()
    r.config_set("maxmemory-policy", "volatile-ttl")
    caplog.set_level(logging.WARNING, logger="seawall")
    with seawall.Lock(r, "evict:sentinel", ttl=5.0):
        pass
    warnings = _warnings(caplog)
    assert len(warnings) == 1 and "volatile-ttl" in warnings[0], warnings
    assert "Sentinel service" in warnings[0]
    r.close()
