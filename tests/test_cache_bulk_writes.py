"""Bulk writes (set_many, a cold get_or_load_many's write-backs) in few round trips, with
every guarantee of the single write: other processes' L1s drop every key, a delete or set
during a load still wins over its write-back, and Redis gone with a circuit breaker leaves
the loaded values unwritten but answered. Sync and asyncio, one server and Cluster."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import redis
import redis.asyncio
import redis.asyncio.connection
import redis.connection
from cacheworld import World, command_calls, do, play, requests_sent
from conftest import Target
from redis.crc import key_slot

import seawall
import seawall.aio
from seawall.cache._codec import cache_keys

KEYS = [f"k{i}" for i in range(100)]


def calls_during(target: Target, before: dict[str, int]) -> dict[str, int]:
    after = command_calls(target)
    return {name: after[name] - before.get(name, 0) for name in after}


async def listening(cache: Any) -> None:
    assert await do(cache._invalidator_here().wait_listening(10)), "the listener never subscribed"


async def heard_from(cache: Any, messages: int) -> None:
    """Wait until `cache`'s listener has applied `messages` messages of other processes."""
    deadline = time.monotonic() + 10
    while cache._invalidator_here().received < messages:
        assert time.monotonic() < deadline, "the invalidation message never arrived"
        await asyncio.sleep(0.01)


def test_set_many_is_one_script_call_and_one_message(target: Target, world: str) -> None:
    async def scenario(face: World) -> None:
        writer = face.cache("sm", ttl=60, hot_keys=0)
        reader = face.cache("sm", ttl=60, hot_keys=0)  # another process: its own listener
        await listening(writer)
        await listening(reader)
        await do(writer.set_many(dict.fromkeys(KEYS, "v1")))
        # Its message (one per hash slot on Cluster) arrives: else it could drop what the
        # reader reads next.
        slots = {key_slot(cache_keys("sm", key).value.encode()) for key in KEYS}
        await heard_from(reader, len(slots) if target.cluster else 1)
        assert await do(reader.get_many(KEYS)) == dict.fromkeys(KEYS, "v1")
        assert await do(reader.get_many(KEYS)) == dict.fromkeys(KEYS, "v1")
        assert reader.stats().l1_hits == 100  # the second read came from its L1
        heard = reader._invalidator_here().received
        before = command_calls(target)
        with requests_sent() as sent:
            assert await do(writer.set_many({key: f"v2 {key}" for key in KEYS})) == 100
        calls = calls_during(target, before)
        if target.cluster:
            # The generation's GET, then one pipeline per primary (three): 100 script
            # calls, one per hash slot, instead of 100 round trips.
            assert sent.count <= 5, sent.heads
            assert calls["evalsha"] <= 100, calls
        else:
            # One script call writes the 100 entries and publishes one message.
            assert sent.count == 1, sent.heads
            assert calls["evalsha"] == 1 and calls["publish"] == 1, calls
        # The reader's L1 drops every key: it reads the new values once told.
        deadline = time.monotonic() + 5
        while await do(reader.get_many(KEYS)) != {key: f"v2 {key}" for key in KEYS}:
            assert time.monotonic() < deadline, "the reader's L1 kept old values"
            await asyncio.sleep(0.01)
        if not target.cluster:
            assert reader._invalidator_here().received == heard + 1  # one message, 100 keys
        # The writer's own L1 holds the new values (as set() keeps its own).
        assert await do(writer.get_many(KEYS)) == {key: f"v2 {key}" for key in KEYS}

    play(world, target, scenario)


def test_cold_get_or_load_many_writes_back_in_one_round_trip(target: Target, world: str) -> None:
    async def scenario(face: World) -> None:
        cache = face.cache("cold", ttl=60, l1_size=0, hot_keys=0)
        other = face.cache("cold", ttl=60, l1_size=0, hot_keys=0)
        await listening(cache)
        loaded: list[list[str]] = []

        def load(keys: list[str]) -> dict[str, str]:
            loaded.append(keys)
            return {key: f"loaded {key}" for key in keys if key != "k7"}

        # A first call loads the scripts (on every node), opens the connections and learns
        # the generation.
        await do(cache.get_or_load_many([f"warm-up {key}" for key in KEYS], load))
        before = command_calls(target)
        with requests_sent() as sent:
            got = await do(cache.get_or_load_many(KEYS, load))
        calls = calls_during(target, before)
        assert got == {key: None if key == "k7" else f"loaded {key}" for key in KEYS}
        assert loaded[-1] == KEYS  # one loader call
        if target.cluster:
            # Per primary (three): the MGET of the plain read, the elections, the
            # write-backs; and a generation read at most.
            assert sent.count <= 10, sent.heads
        else:
            # The plain read's MGET, 100 elections in one pipeline, one write-back call
            # (the generation is known from the listener).
            assert sent.count <= 4, sent.heads
            assert calls["evalsha"] == 101 and calls["mget"] == 1, calls
        assert cache.stats().loads == 200 and cache.stats().voided == 0
        # Written for everyone: another process reads them, and loads nothing.
        assert await do(other.get_or_load_many(KEYS, load)) == got
        assert len(loaded) == 2

    play(world, target, scenario)


def test_a_delete_or_set_during_a_cold_load_many_wins(target: Target, world: str) -> None:
    async def scenario(face: World) -> None:
        # A namespace per world: this test ends with a clear(), whose message can reach a
        # node's subscribers after the next test's FLUSHALL (the cluster bus carries it
        # late), and would name a generation that that test's Redis no longer holds.
        name = f"race-{face.world}"
        cache = face.cache(name, ttl=60, hot_keys=0)
        other = face.cache(name, ttl=60, hot_keys=0)  # another process
        gate, started = face.gate(), face.gate()
        keys = [f"r{i}" for i in range(10)]
        load = face.loader(gate, started, None)  # waits for the gate, then answers

        async def load_many_async(wanted: list[str]) -> dict[str, str]:
            await do(load())
            return {key: "old" for key in wanted}

        def load_many(wanted: list[str]) -> dict[str, str]:
            load()
            return {key: "old" for key in wanted}

        loader = load_many if face.world == "sync" else load_many_async
        loading = face.background(lambda: cache.get_or_load_many(keys, loader))
        await face.wait_started(started)
        # While the loader reads the database: r3 is deleted, r5 written anew.
        await do(other.delete("r3"))
        await do(other.set("r5", "newer"))
        gate.set()
        # The caller gets what it loaded...
        assert await face.result(loading) == dict.fromkeys(keys, "old")
        assert cache.stats().voided == 2
        # ...but the delete and the set stand, in Redis and in every L1.
        fresh = face.cache(name, ttl=60, l1_size=0)
        expected = {**dict.fromkeys(keys, "old"), "r5": "newer"}
        del expected["r3"]
        assert await do(fresh.get_many(keys)) == expected
        deadline = time.monotonic() + 5
        while await do(cache.get_many(keys)) != expected:
            assert time.monotonic() < deadline, "the loading cache's L1 kept a voided load"
            await asyncio.sleep(0.01)
        # A clear during a load: its values land in the old generation, read by nobody.
        gate, started = face.gate(), face.gate()
        load = face.loader(gate, started, None)
        loading = face.background(lambda: cache.get_or_load_many(["c1", "c2"], loader))
        await face.wait_started(started)
        await do(other.clear())
        gate.set()
        assert await face.result(loading) == {"c1": "old", "c2": "old"}
        assert await do(fresh.get_many(["c1", "c2"])) == {}

    play(world, target, scenario)


@pytest.mark.parametrize("world", ["sync", "async"])
def test_write_back_with_redis_frozen_and_a_breaker_answers(
    seawall_server_factory: Any, world: str
) -> None:
    server = seawall_server_factory()
    breaker = seawall.CircuitBreaker(failure_threshold=1, open_for=30.0, call_timeout=0.3)
    keys = [f"f{i}" for i in range(20)]

    def load(wanted: list[str]) -> dict[str, str]:
        server.pause()  # SIGSTOP while loading: the write-back finds Redis frozen
        return {key: f"db {key}" for key in wanted}

    try:
        if world == "sync":
            r = redis.Redis.from_url(server.url, socket_timeout=1.0)
            cache = seawall.Cache(r, "frozen", ttl=60, breaker=breaker)
            started = time.monotonic()
            got = cache.get_or_load_many(keys, load)
        else:

            async def main() -> dict[str, str | None]:
                client = redis.asyncio.Redis.from_url(server.url)
                acache = seawall.aio.Cache(client, "frozen", ttl=60, breaker=breaker)
                try:
                    return await acache.get_or_load_many(keys, load)
                finally:
                    server.resume()
                    await client.aclose()

            started = time.monotonic()
            got = asyncio.run(main())
        took = time.monotonic() - started
    finally:
        server.resume()
    assert got == {key: f"db {key}" for key in keys}
    assert breaker.state == "open"
    print(f"\nget_or_load_many with Redis frozen during the load took {took:.2f} s")
    assert took < 4.0, took  # one bounded wait (socket_timeout or call_timeout), not one per key


def test_the_followers_invalidation_is_one_pipeline_per_node(target: Target) -> None:
    """What `seawall follow` runs for a batch of row changes: every entry voided (L2, and
    another process's L1 once told) in one round trip on one server, and on Cluster one
    read of the generation, then one pipeline per primary, not a script call per key."""
    from seawall.cdc._invalidate import invalidate, new_sender

    reader = seawall.Cache(target.sync(), "fol", ttl=60, hot_keys=0)
    assert reader._invalidator_here().wait_listening(10)
    reader.set_many(dict.fromkeys(KEYS, "old"))
    assert reader.get_many(KEYS) == dict.fromkeys(KEYS, "old")  # kept in its L1 too
    client = target.sync()
    generations: dict[str, int] = {}
    # The script is loaded on every primary (a first NOSCRIPT sends the batch again).
    invalidate(client, [("fol", f"warm {slot}") for slot in range(30)], new_sender(), generations)
    before = command_calls(target)
    with requests_sent() as sent:
        assert invalidate(client, [("fol", key) for key in KEYS], new_sender(), generations) == 100
    calls = calls_during(target, before)
    assert calls["evalsha"] == 100, calls
    if target.cluster:
        assert sent.count <= 4, sent.heads  # the generation's MGET, three primaries
    else:
        assert sent.count == 1, sent.heads
    deadline = time.monotonic() + 5
    while reader.get_many(KEYS):
        assert time.monotonic() < deadline, "entries the follower voided were still read"
        time.sleep(0.01)
