"""A Bloom filter whose keys are all gone is not read as empty (issue 10, item 9).

FLUSHALL (as an eviction of both keys, or a failover to an empty replica, would leave it)
must make the filter raise BloomFilterError naming it and saying how to rebuild, and a
Cache with `bloom=` must then call the loader rather than cache "absent" for rows that
exist.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from conftest import Target
from test_bloom import play

import seawall
import seawall.aio


def flush(target: Target) -> None:
    admin = target.sync()
    if target.cluster:
        admin.flushall(target_nodes=admin.PRIMARIES)
    else:
        admin.flushall()


def test_a_flushed_filter_raises_instead_of_reading_empty(target: Target, world: str) -> None:
    async def scenario(make: Any, client: Any) -> None:
        bloom = make("lost", 1_000)
        assert await bloom.create() is True
        assert await bloom.create() is False  # exists: left as it is
        await bloom.add_many(["a", "b"])
        assert await bloom.contains_many(["a", "b"]) == [True, True]
        flush(target)
        for call in (bloom.might_contain("a"), bloom.add("c"), bloom.contains_many(["b"])):
            with pytest.raises(seawall.BloomFilterError, match=r"'lost' does not exist") as err:
                await call
            assert err.value.filter_name == "lost"
            assert "create()" in str(err.value) and "add_many()" in str(err.value)
        # Rebuilt as the message says: created again, every item added again.
        assert await bloom.create() is True
        await bloom.add_many(["a", "b"])
        assert await bloom.contains_many(["a", "b", "zz"]) == [True, True, False]

    play(target, world, scenario)


def test_a_never_created_filter_raises(target: Target, world: str) -> None:
    async def scenario(make: Any, client: Any) -> None:
        bloom = make("never", 100)
        with pytest.raises(seawall.BloomFilterError, match="never created"):
            await bloom.might_contain("a")
        with pytest.raises(seawall.BloomFilterError, match="never created"):
            await bloom.add("a")  # an add does not create it either
        await bloom.clear()  # clear() leaves it created, empty
        assert await bloom.might_contain("a") is False

    play(target, world, scenario)


def test_cache_does_not_cache_absent_after_the_filter_is_lost(
    target: Target, caplog: pytest.LogCaptureFixture
) -> None:
    r = target.sync()
    ids = seawall.BloomFilter(r, "row-ids", capacity=1_000)
    ids.create()
    ids.add_many(range(10))
    cache = seawall.Cache(r, "rows", bloom=ids, l1_size=0)
    assert cache.get_or_load(1, lambda: {"id": 1}) == {"id": 1}
    flush(target)  # the filter and the cache entries are gone; the rows are not
    caplog.set_level(logging.WARNING, logger="seawall")
    calls: list[int] = []
    for row in (1, 2, 3):
        found = cache.get_or_load(row, lambda row=row: calls.append(row) or {"id": row})
        assert found == {"id": row}  # loaded, not "absent"
    assert calls == [1, 2, 3]
    assert cache.stats().bloom_rejects == 0
    assert cache.get(2) == {"id": 2}  # the row was cached, not an absent marker
    warned = [rec for rec in caplog.records if "Bloom filter" in rec.getMessage()]
    assert len(warned) == 1, [rec.getMessage() for rec in warned]  # once, not per miss
    assert "does not exist" in warned[0].getMessage()
    cache.set(20, {"id": 20})  # a set while the filter is lost still writes the value
    assert cache.get(20) == {"id": 20}


def test_async_cache_does_not_cache_absent_after_the_filter_is_lost(target: Target) -> None:
    async def main() -> None:
        r = target.aio()
        try:
            ids = seawall.aio.BloomFilter(r, "row-ids-aio", capacity=1_000)
            await ids.create()
            await ids.add("present")
            cache = seawall.aio.Cache(r, "rows-aio", bloom=ids, l1_size=0)

            async def load() -> str:
                return "row"

            assert await cache.get_or_load("absent", load) is None  # a real reject
            flush(target)
            assert await cache.get_or_load("present", load) == "row"
            assert await cache.get_or_load("other", load) == "row"
            assert cache.stats().bloom_rejects == 1
        finally:
            await r.aclose()

    asyncio.run(main())
