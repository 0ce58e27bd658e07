"""get_many, set_many, get_or_load_many, and one value type at every level: sync and
asyncio, on one server and on Cluster."""

from __future__ import annotations

import asyncio
import datetime
import threading
import time
from decimal import Decimal
from typing import Any

import pytest
from conftest import Target

import seawall
import seawall.aio

ROW = {"id": 1, "at": datetime.date(2026, 1, 2), "price": Decimal("1.50"), "pair": (1, 2)}


def test_bulk_calls_and_one_type_everywhere(target: Target, world: str) -> None:
    if world == "sync":
        _sync_scenario(target)
    else:
        asyncio.run(_async_scenario(target))


def _sync_scenario(target: Target) -> None:
    cache = seawall.Cache(target.sync(), "bulk", ttl=60)
    other = seawall.Cache(target.sync(), "bulk", ttl=60, l1_size=0)  # as another process
    # 3. the loading caller, its L1 and every other reader get the same types.
    loaded = cache.get_or_load("row", lambda: {5: "five", "row": ROW})
    assert loaded == other.get("row") == cache.get("row") == {5: "five", "row": ROW}
    assert type(other.get("row")["row"]["pair"]) is tuple
    # Compressed over 64 bytes; any reader decompresses, a str-decoding client is refused.
    packed = seawall.Cache(target.sync(), "bulk", ttl=60, compress_over=64)
    packed.set("big", {"rows": [ROW] * 20})
    assert other.get("big") == {"rows": [ROW] * 20}
    with pytest.raises(ValueError, match="decode_responses=True"):
        seawall.Cache(target.sync(decode_responses=True), "bulk", compress_over=64)
    # 4. set_many, get_many.
    assert cache.set_many({"a": 1, "b": (2, 3), "gone": None}) == 3
    assert other.get_many(["a", "b", "gone", "never"]) == {"a": 1, "b": (2, 3)}
    # get_or_load_many: one loader call for the keys nobody holds...
    calls: list[list[str]] = []

    def load(keys: list[str]) -> dict[str, Any]:
        calls.append(sorted(keys))
        return {key: key.upper() for key in keys if key != "none"}

    got = other.get_or_load_many(["a", "x", "y", "none"], load)
    assert got == {"a": 1, "x": "X", "y": "Y", "none": None} and calls == [["none", "x", "y"]]
    assert list(got) == ["a", "x", "y", "none"]  # in the order asked
    assert cache.get_or_load_many(["x", "y", "none"], load) == {"x": "X", "y": "Y", "none": None}
    assert len(calls) == 1
    # ...and a key another process is loading is waited for, not loaded again.
    started, release = threading.Event(), threading.Event()

    def slow() -> str:
        started.set()
        release.wait(10)
        return "theirs"

    first = threading.Thread(target=lambda: cache.get_or_load("busy", slow))
    first.start()
    assert started.wait(10)
    threading.Timer(0.2, release.set).start()
    assert other.get_or_load_many(["busy", "free"], load) == {"busy": "theirs", "free": "FREE"}
    first.join(10)
    assert calls[-1] == ["free"]
    # With a Bloom filter, keys it rules out are cached as absent without the loader.
    ids = seawall.BloomFilter(target.sync(), "bulk-ids", capacity=1000, error_rate=1e-6)
    ids.create()
    ids.add_many(["in1", "in2"])
    guarded = seawall.Cache(target.sync(), "bulk-bloom", ttl=60, bloom=ids)
    wanted = ["in1", "in2", *(f"out{i}" for i in range(20))]
    got = guarded.get_or_load_many(wanted, load)
    assert got == {"in1": "IN1", "in2": "IN2", **{f"out{i}": None for i in range(20)}}
    assert calls[-1] == ["in1", "in2"] and guarded.stats().bloom_rejects == 20


async def _async_scenario(target: Target) -> None:
    client, second = target.aio(), target.aio()
    try:
        cache = seawall.aio.Cache(client, "bulk", ttl=60)
        other = seawall.aio.Cache(second, "bulk", ttl=60, l1_size=0)

        async def row() -> dict[Any, Any]:
            return {5: "five", "row": ROW}

        loaded = await cache.get_or_load("row", row)
        assert loaded == await other.get("row") == {5: "five", "row": ROW}
        packed = seawall.aio.Cache(client, "bulk", ttl=60, compress_over=64)
        await packed.set("big", {"rows": [ROW] * 20})
        assert await other.get("big") == {"rows": [ROW] * 20}
        assert await cache.set_many([("a", 1), ("b", (2, 3)), ("gone", None)]) == 3
        assert await other.get_many(["a", "b", "gone", "never"]) == {"a": 1, "b": (2, 3)}
        calls: list[list[str]] = []

        async def load(keys: list[str]) -> dict[str, Any]:
            calls.append(sorted(keys))
            return {key: key.upper() for key in keys}

        assert await other.get_or_load_many(["a", "x", "y"], load) == {"a": 1, "x": "X", "y": "Y"}
        assert await cache.get_or_load_many(["x", "y"], load) == {"x": "X", "y": "Y"}
        assert calls == [["x", "y"]]
        started, release = asyncio.Event(), asyncio.Event()

        async def slow() -> str:
            started.set()
            await release.wait()
            return "theirs"

        first = asyncio.create_task(cache.get_or_load("busy", slow))
        await asyncio.wait_for(started.wait(), 10)
        asyncio.get_running_loop().call_later(0.2, release.set)
        got = await other.get_or_load_many(["busy", "free"], load)
        assert got == {"busy": "theirs", "free": "FREE"} and calls[-1] == ["free"]
        assert await first == "theirs"
    finally:
        await client.aclose()
        await second.aclose()


def test_tags_and_clear(target: Target, world: str) -> None:
    if world == "sync":
        _sync_tags(target)
    else:
        asyncio.run(_async_tags(target))


def _sync_tags(target: Target) -> None:
    cache = seawall.Cache(target.sync(), "tag*s", ttl=60)
    # Another process, reading Redis (its L1 would drop the keys when the message arrives).
    other = seawall.Cache(target.sync(), "tag*s", ttl=60, l1_size=0)
    neighbour = seawall.Cache(target.sync(), "tag*s2", ttl=60)

    @cache.cached(key="user:{uid}", tags=["user:{uid}", "users"])
    def user(uid: int) -> str:
        return f"user {uid} v{len(calls)}"

    calls: list[int] = []
    assert user(1) == "user 1 v0" and user(2) == "user 2 v0"
    cache.set("plain", 1, tags="users")
    cache.set("kept", 2)
    cache.set_many({"m1": 1, "m2": 2}, tags=["many"])
    assert cache.get_or_load("loaded", lambda: 3, tags=["users"]) == 3
    assert other.get("user:1") == "user 1 v0" and other.get("plain") == 1
    # A load in flight when the tag is deleted cannot write back.
    started, release = threading.Event(), threading.Event()

    def slow() -> str:
        started.set()
        release.wait(10)
        return "old"

    loading = threading.Thread(target=lambda: cache.get_or_load("late", slow, tags="users"))
    loading.start()
    assert started.wait(10)
    assert cache.delete_tag("users") == 5  # user:1, user:2, plain, loaded, late
    release.set()
    loading.join(10)
    assert other.get("user:1") is None and other.get("plain") is None
    assert cache.get("late") is None and other.get("kept") == 2
    assert cache.delete_tag("users") == 0 and cache.delete_tag("user:1") == 1
    calls.append(1)
    assert user(1) == "user 1 v1"  # loaded again
    neighbour.set("n", 1)
    cache.clear()  # kept, m1, m2, user:1: under the old generation, left to expire
    assert cache.get_many(["kept", "m1", "user:1"]) == {} and neighbour.get("n") == 1
    # Another process drops them once the clear's message reaches its listener.
    deadline = time.monotonic() + 5
    while other.get_many(["kept", "m1", "user:1"]):
        assert time.monotonic() < deadline, "the clear never reached the other client"
        time.sleep(0.01)
    assert cache.get("kept") is None and user(1) == "user 1 v1"  # loaded again
    assert cache.delete_tag("user:1") == 1 and other.get("user:1") is None


async def _async_tags(target: Target) -> None:
    client = target.aio()
    try:
        cache = seawall.aio.Cache(client, "tags", ttl=60)
        neighbour = seawall.aio.Cache(client, "tags2", ttl=60)

        @cache.cached(key="user:{uid}", tags=["user:{uid}", "users"])
        async def user(uid: int) -> str:
            return f"user {uid}"

        assert await user(1) == "user 1"
        await cache.set("plain", 1, tags="users")
        await cache.set("kept", 2)
        await neighbour.set("n", 1)

        async def load(keys: list[str]) -> dict[str, int]:
            return {key: 1 for key in keys}

        assert await cache.get_or_load_many(["a", "b"], load, tags=["users"]) == {"a": 1, "b": 1}
        assert await cache.delete_tag("users") == 4
        assert await cache.get_many(["user:1", "plain", "a", "kept"]) == {"kept": 2}
        await cache.clear()
        assert await cache.get("kept") is None and await neighbour.get("n") == 1
    finally:
        await client.aclose()
