"""seawall.BloomFilter and seawall.aio.BloomFilter against real servers (bitmap backend).

No server started by this suite has BF.* commands (RedisBloom, valkey-bloom), so the
module backend is not exercised here; `backend="auto"` is tested to fall back to the bitmap.
Each scenario is written once, awaiting every call; in the sync world the calls are made
on seawall.BloomFilter through a thin awaitable wrapper.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from conftest import Target

import seawall
import seawall.aio

Scenario = Callable[[Callable[..., Any], Any], Awaitable[None]]


class Awaitable_:
    """seawall.BloomFilter with awaitable methods, so one scenario serves both worlds."""

    def __init__(self, bloom: seawall.BloomFilter) -> None:
        self.bloom = bloom

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.bloom, name)
        if not callable(attr) or name == "expected_error_rate":
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            return attr(*args, **kwargs)

        return call


def play(target: Target, world: str, scenario: Scenario) -> None:
    """Run `scenario(make, raw_client)`; make(...) builds a filter of the world under test."""
    if world == "sync":
        client = target.sync()
        make = lambda *a, **k: Awaitable_(seawall.BloomFilter(client, *a, **k))  # noqa: E731
        asyncio.run(scenario(make, client))
        return

    async def main() -> None:
        client = target.aio()
        try:
            await scenario(lambda *a, **k: seawall.aio.BloomFilter(client, *a, **k), client)
        finally:
            await client.aclose()

    asyncio.run(main())


async def maybe(value: Any) -> Any:
    return await value if asyncio.iscoroutine(value) else value


def ids(prefix: str, count: int) -> list[str]:
    return [f"{prefix}:{i}" for i in range(count)]


@pytest.fixture
def cluster(seawall_cluster: Any) -> Iterator[Target]:
    seawall_cluster.flushall()
    target = Target(seawall_cluster.url, cluster=True)
    yield target
    target.close()


# --- acceptance 6 (Bloom part) ---------------------------------------------------------------


async def measure(bloom: Any, present: list[str], absent: list[str]) -> tuple[int, int]:
    """(false negatives, loader calls). A cache asks the loader only when the filter says
    "maybe", so for ids that exist nowhere every loader call is a false positive."""
    false_negatives = (await bloom.contains_many(present)).count(False)
    loader_calls = 0
    for maybe_present in await bloom.contains_many(absent):
        if maybe_present:
            loader_calls += 1  # stands for a loader(key) that finds nothing
    return false_negatives, loader_calls


@pytest.mark.parametrize(
    ("world", "capacity", "queries"), [("sync", 100_000, 100_000), ("async", 10_000, 40_000)]
)
def test_false_positive_rate_and_no_false_negatives(
    standalone: Target, world: str, capacity: int, queries: int
) -> None:
    async def scenario(make: Any, client: Any) -> None:
        bloom = make("users", capacity, 0.01)
        await bloom.create()
        present = ids("user", capacity)
        assert (await bloom.add_many(present)).count(True) >= capacity * 0.98
        absent = ids("ghost", queries)
        false_negatives, loader_calls = await measure(bloom, present, absent)
        rate = loader_calls / len(absent)
        print(f"{world} n={capacity}: {false_negatives} FN, {loader_calls} FP ({rate:.3%})")
        assert false_negatives == 0
        assert rate <= 0.011
        assert rate >= 0.006  # the filter is not simply oversized

    play(standalone, world, scenario)


def test_false_positive_rate_on_the_cluster(cluster: Target, world: str) -> None:
    capacity, queries = 5_000, 25_000

    async def scenario(make: Any, client: Any) -> None:
        bloom = make("{orders}ids", capacity, 0.02)
        await bloom.create()
        present = ids("order", capacity)
        await bloom.add_many(present)
        false_negatives, loader_calls = await measure(bloom, present, ids("none", queries))
        print(f"cluster {world}: {false_negatives} FN, {loader_calls} FP of {queries}")
        assert false_negatives == 0
        assert loader_calls / queries <= 0.022

    play(cluster, world, scenario)
    # One slot: the user's hash tag is kept, so the filter sits beside the data it guards.
    assert cluster.keys("seawall:bloom:*") == [
        "seawall:bloom:#{orders}ids",
        "seawall:bloom:#{orders}ids:sig",
    ]


# --- behaviour -------------------------------------------------------------------------------


def test_add_reports_new_items_and_membership(target: Target, world: str) -> None:
    async def scenario(make: Any, client: Any) -> None:
        bloom = make("tags", 1_000, 0.001)
        await bloom.create()
        assert await bloom.might_contain("a") is False  # a filter never written
        assert await bloom.add("a") is True
        assert await bloom.add("a") is False
        assert await bloom.add_many(["b", 7, b"c", "b"]) == [True, True, True, False]
        assert await bloom.contains_many(["a", "b", "7", 7, b"b", "zz"]) == [
            True,
            True,
            True,
            True,
            True,
            False,
        ]
        assert await bloom.add_many([]) == [] and await bloom.contains_many(iter(())) == []
        await bloom.add_many(f"g{i}" for i in range(1_234))  # generators, several batches
        assert all(await bloom.contains_many(f"g{i}" for i in range(1_234)))
        await bloom.clear()
        assert await bloom.contains_many(["a", "b", "g5"]) == [False, False, False]
        assert await bloom.add("a") is True

    play(target, world, scenario)


def test_sync_in_operator_and_async_refusal(standalone: Target) -> None:
    bloom = seawall.BloomFilter(standalone.sync(), "ops", 100)
    bloom.create()
    bloom.add("x")
    assert "x" in bloom and "y" not in bloom

    async def main() -> None:
        client = standalone.aio()
        abloom = seawall.aio.BloomFilter(client, "ops", 100)
        with pytest.raises(TypeError, match=r"await bloomfilter.might_contain\(item\)"):
            "x" in abloom  # noqa: B015
        assert await abloom.might_contain("x")  # the same filter, seen from asyncio
        await client.aclose()

    asyncio.run(main())


def test_bits_are_the_ones_the_pure_module_computes(standalone: Target) -> None:
    # The scripts walk offsets from (x, y) themselves; they must agree with _arithmetic.positions.
    from seawall.bloom import _arithmetic

    client = standalone.sync()
    bloom = seawall.BloomFilter(client, "agree", 500, 0.01)
    bloom.create()
    items = [f"i{i}" for i in range(500)]
    bloom.add_many(items)
    sizing = _arithmetic.size(500, 0.01)
    expected = {p for item in items for p in _arithmetic.positions(item.encode(), sizing)}
    bitmap = client.get(bloom.key)
    set_bits = {i for i in range(sizing.bits) if bitmap[i >> 3] >> (7 - (i & 7)) & 1}
    assert set_bits == expected  # Redis numbers bits from the most significant one


def test_sizing_properties(standalone: Target) -> None:
    bloom = seawall.BloomFilter(standalone.sync(), "sized", 100_000, 0.01)
    bloom.create()
    assert (bloom.capacity, bloom.error_rate) == (100_000, 0.01)
    assert (bloom.size_bits, bloom.hash_count, bloom.size_bytes) == (959_361, 7, 119_921)
    assert bloom.expected_error_rate(100_000) <= 0.01
    assert bloom.key == "seawall:bloom:{sized}"
    assert "capacity=100000" in repr(bloom)
    bloom.add("one")
    assert standalone.sync().strlen(bloom.key) <= bloom.size_bytes


def test_other_sizing_under_the_same_name_is_refused(target: Target, world: str) -> None:
    async def scenario(make: Any, client: Any) -> None:
        first = make("shared", 1_000, 0.01)
        await first.create()
        await first.add("a")
        other = make("shared", 2_000, 0.01)
        for call in (other.add("a"), other.might_contain("a")):
            with pytest.raises(seawall.BloomFilterError, match="built with other sizing") as err:
                await call
            assert err.value.filter_name == "shared"
        await other.clear()
        assert await other.add("a") is True

    play(target, world, scenario)


def test_a_lost_bitmap_is_detected_not_read_as_empty(target: Target, world: str) -> None:
    async def scenario(make: Any, client: Any) -> None:
        bloom = make("evicted", 1_000)
        await bloom.create()
        await bloom.add_many(["a", "b"])
        await maybe(client.delete(bloom.key))  # as maxmemory eviction would
        with pytest.raises(seawall.BloomFilterError, match=r"damaged.*clear"):
            await bloom.might_contain("a")
        with pytest.raises(seawall.BloomFilterError, match="damaged"):
            await bloom.add("c")
        await bloom.clear()
        await bloom.add("c")
        await maybe(client.delete(bloom.key + ":sig"))
        with pytest.raises(seawall.BloomFilterError, match="damaged"):
            await bloom.might_contain("c")

    play(target, world, scenario)


def flush_scripts(target: Target) -> None:
    """SCRIPT FLUSH on every node, as a restart or failover would leave the script caches."""
    admin = target.sync()
    if target.cluster:
        for node in admin.get_nodes():
            admin.get_redis_connection(node).script_flush()
    else:
        admin.script_flush()


def test_scripts_reload_after_script_flush(target: Target, world: str) -> None:
    async def scenario(make: Any, client: Any) -> None:
        bloom = make("flushed", 5_000)
        await bloom.create()
        await bloom.add_many(ids("a", 1_200))  # several pipelined batches
        flush_scripts(target)
        assert (await bloom.add_many(ids("b", 1_200))).count(True) >= 1_150
        flush_scripts(target)
        assert all(await bloom.contains_many(ids("a", 1_200) + ids("b", 1_200)))
        flush_scripts(target)
        assert await bloom.might_contain("a:1")  # a single call: EVALSHA, then EVAL

    play(target, world, scenario)


def test_auto_backend_falls_back_to_the_bitmap(target: Target, world: str) -> None:
    async def scenario(make: Any, client: Any) -> None:
        bloom = make("auto", 100, backend="auto")
        await bloom.create()
        assert await bloom.add("x") is True
        assert await bloom.might_contain("x")
        assert await maybe(client.exists(bloom.key)) == 1  # the bitmap, not a BF.* key

    play(target, world, scenario)


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"capacity": 0}, ValueError, "capacity of Bloom filter 'f' must be >= 1"),
        ({"error_rate": 0.0}, ValueError, "strictly between 0 and 1"),
        ({"error_rate": 1.0}, ValueError, "strictly between 0 and 1"),
        ({"capacity": 10**10, "error_rate": 1e-6}, ValueError, "512 MiB"),
        ({"backend": "bf"}, ValueError, "backend of Bloom filter 'f' must be one of"),
        ({"name": ""}, ValueError, "must not be empty"),
    ],
)
def test_bad_construction_is_refused(kwargs: dict[str, Any], error: type, words: str) -> None:
    import redis
    import redis.asyncio

    args: dict[str, Any] = {"name": "f", "capacity": 10, "error_rate": 0.01, **kwargs}
    with pytest.raises(error, match=words):
        seawall.BloomFilter(redis.Redis(port=1), **args)
    with pytest.raises(error, match=words):
        seawall.aio.BloomFilter(redis.asyncio.Redis(port=1), **args)
    with pytest.raises(TypeError, match=r"use seawall\.aio\.BloomFilter"):
        seawall.BloomFilter(redis.asyncio.Redis(port=1), "f", 10)


def test_bad_items_are_refused_before_anything_is_sent(standalone: Target, world: str) -> None:
    async def scenario(make: Any, client: Any) -> None:
        bloom = make("typed", 100)
        for bad in (1.5, None, True, ["list"]):
            with pytest.raises(TypeError, match="must be str, bytes or int"):
                await bloom.add(bad)
        with pytest.raises(TypeError, match="must be str, bytes or int"):
            await bloom.add_many(["ok", 2.5])
        with pytest.raises(TypeError, match="single str"):
            await bloom.add_many("abc")
        assert await maybe(client.exists(bloom.key)) == 0  # "ok" was not added either

    play(standalone, world, scenario)
