"""Cache and database consistency: versioned writes and the durable delayed double delete
(issue 11, sections 1 and 2), on one server and the 3+3 cluster, sync and asyncio."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

import consistencyworkers
import pytest
from conftest import SPAWN, Target

import seawall
import seawall.aio
from seawall.cache._async.again import GRACE, schedule_key


class Api:
    """One Cache in either world, called from a coroutine: the sync one in a thread."""

    def __init__(self, target: Target, world: str, namespace: str, **options: Any) -> None:
        self.world = world
        if world == "sync":
            self.cache: Any = seawall.Cache(target.sync(), namespace, **options)
        else:
            self.cache = seawall.aio.Cache(target.aio(), namespace, **options)

    async def __call__(self, method: str, *args: Any, **kwargs: Any) -> Any:
        bound = getattr(self.cache, method)
        if self.world == "sync":
            return await asyncio.to_thread(bound, *args, **kwargs)
        return await bound(*args, **kwargs)


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(scenario())


# --- versioned writes --------------------------------------------------------------------


def test_a_versioned_set_stores_only_newer_versions(target: Target, world: str) -> None:
    async def scenario() -> None:
        users = Api(target, world, "v-users")
        assert await users("set", 1, {"v": 5}, version=5) is True
        assert await users("set", 1, {"v": 4}, version=4) is False
        assert await users("get", 1) == {"v": 5}
        assert await users("set", 1, {"v": "5b"}, version=5) is False  # equal is not newer
        assert await users("set", 1, {"v": 6}, version=6) is True
        assert await users("get", 1) == {"v": 6}
        # Another process's view (no L1 in common) agrees.
        assert Api(target, world, "v-users").cache is not users.cache
        assert await Api(target, world, "v-users", l1_size=0)("get", 1) == {"v": 6}

    run(scenario)


def test_a_versioned_delete_leaves_a_tombstone_older_writes_cannot_pass(
    target: Target, world: str
) -> None:
    async def scenario() -> None:
        rows = Api(target, world, "v-rows")
        assert await rows("set", "a", "seven", version=7) is True
        assert await rows("delete", "a", version=5) is False  # older than what is stored
        assert await rows("get", "a") == "seven"
        assert await rows("delete", "a", version=8) is True
        assert await rows("get", "a") is None
        assert await rows("set", "a", "stale six", version=6) is False  # no resurrection
        assert await rows("set", "a", "stale eight", version=8) is False
        assert await rows("get", "a") is None
        assert await rows("set", "a", "nine", version=9) is True
        assert await rows("get", "a") == "nine"
        # The tombstone lives as long as an entry would, no longer.
        tombstone = "seawall:cache:{v-rows:b}:version"
        await rows("delete", "b", version=1)
        pttl = target.sync().pttl(tombstone)
        assert 0 < pttl <= (300 * 1.1 + 300) * 1000

    run(scenario)


def test_versions_compare_exactly_beyond_float_precision(target: Target, world: str) -> None:
    async def scenario() -> None:
        big = Api(target, world, "v-big")
        assert await big("set", "k", "a", version=2**70) is True
        assert await big("set", "k", "b", version=2**70 - 1) is False
        assert await big("set", "k", "c", version=2**70 + 1) is True
        assert await big("set", "k", "d", version=9 * 10**20) is False  # fewer digits
        assert await big("get", "k") == "c"

    run(scenario)


def test_racing_versioned_writers_leave_the_newest(target: Target, world: str) -> None:
    """32 writers store versions 1..32 of 20 keys in random order, all at once: every key
    ends with version 32's value, whatever order the writes landed in."""

    async def scenario() -> None:
        items = Api(target, world, "v-race")
        writes = [(key, version) for key in range(20) for version in range(1, 33)]
        random.Random(7).shuffle(writes)
        results: list[bool] = []
        # redis-py's asyncio cluster client fails calls started together on its very first
        # use (connections set up concurrently: "'NoneType' object has no attribute
        # 'writelines'", with or without seawall): one call first.
        await items("get", 0)
        for start in range(0, len(writes), 32):
            chunk = writes[start : start + 32]
            results += await asyncio.gather(
                *(items("set", key, f"{key}@{version}", version=version) for key, version in chunk)
            )
        assert sum(results) >= 20  # at least the newest write of each key was stored
        fresh = Api(target, world, "v-race", l1_size=0)
        for key in range(20):
            assert await fresh("get", key) == f"{key}@32"

    run(scenario)


def test_unversioned_calls_behave_as_before_and_bad_versions_are_refused(
    target: Target, world: str
) -> None:
    async def scenario() -> None:
        plain = Api(target, world, "v-plain")
        assert await plain("set", 1, "x") is True
        assert await plain("set", 1, "y") is True
        assert await plain("delete", 1) is True
        assert await plain("set", 2, "two", version=3) is True
        assert await plain("set", 2, "unversioned") is True  # an unversioned set overrides
        assert await plain("set", 2, "older", version=2) is False  # the version still guards
        for bad in (1.5, "3", True, None.__class__):
            with pytest.raises(TypeError, match="version of key '2' must be an int >= 0"):
                await plain("set", 2, "bad", version=bad)
            with pytest.raises(TypeError, match="version"):
                await plain("delete", 2, version=bad)
        # The right type, a wrong value: ValueError, as for any out-of-range argument.
        with pytest.raises(ValueError, match="version of key '2' must be an int >= 0"):
            await plain("set", 2, "bad", version=-1)
        with pytest.raises(ValueError, match="got -1"):
            await plain("delete", 2, version=-1)
        assert await plain("get", 2) == "unversioned"

    run(scenario)


# --- the delayed double delete -------------------------------------------------------------


async def gone_after(api: Api, key: Any, since: float, limit: float) -> float:
    """Seconds from `since` until `key` reads as absent; fails past `limit`."""
    while True:
        if await api("get", key) is None:
            return time.monotonic() - since
        assert time.monotonic() - since < limit, f"{key!r} still cached after {limit} s"
        await asyncio.sleep(0.02)


async def schedule_emptied(admin: Any, namespace: str) -> None:
    """The schedule is removed once its deletes are confirmed (just after they ran)."""
    deadline = time.monotonic() + 5.0
    while admin.exists(schedule_key(namespace)):
        assert time.monotonic() < deadline, f"second deletes of {namespace!r} still scheduled"
        await asyncio.sleep(0.02)


def test_a_fill_from_a_lagging_replica_is_deleted_again(target: Target, world: str) -> None:
    """The writer deletes with again_after; a reader that missed then loads the old row
    (from a lagging replica) and fills the cache; the second delete removes it within
    again_after + 2 s (the sweeper looks every 0.5 s; the rest is room for a loaded
    machine: 1 s was 0.01 s short once beside the parallel workers). Without again_after
    the stale fill stays. The fill must come before the second delete is due, as the
    guarantee assumes (again_after longer than the replica's lag), so the reader is
    connected before the delete."""

    async def scenario() -> None:
        again = 1.0
        writer, reader = Api(target, world, "dd"), Api(target, world, "dd")
        await writer("set", "row", "old")
        # The reader's client connected first: its fill must land before the second delete
        # is due (a new Cluster client's first call reads the slot map, and on a busy
        # machine that once outlasted a 0.5 s again_after).
        assert await reader("get", "warm-up") is None
        started = time.monotonic()
        await writer("delete", "row", again_after=again)
        lagging = await reader("get_or_load", "row", lambda: "old (replica lag)")
        assert lagging == "old (replica lag)"
        took = await gone_after(reader, "row", started, again + 2.0)
        assert took >= again - 0.05, took  # not before it was due
        assert await reader("get_or_load", "row", lambda: "new") == "new"
        # Control: a plain delete leaves the lagging reader's fill in place.
        await writer("delete", "row")
        await reader("set", "row", "old (replica lag)")
        await asyncio.sleep(again + 0.3)
        assert await reader("get", "row") == "old (replica lag)"
        await schedule_emptied(target.sync(), "dd")  # done and forgotten

    run(scenario)


def test_delete_many_is_one_batch_with_its_second_deletes(target: Target, world: str) -> None:
    async def scenario() -> None:
        again = 2.0  # room for the refill below to land before the second deletes are due
        items = Api(target, world, "dd-many")
        await items("warm", {i: i for i in range(300)})
        started = time.monotonic()
        assert await items("delete_many", range(300), again_after=again) == 300
        assert all([await items("get", i) is None for i in range(0, 300, 7)])
        # Lagging readers fill every key again (written raw, in one pipeline: the cache's
        # own writes would cost a round trip per key on Cluster).
        pipe = target.sync().pipeline(transaction=False)
        for i in range(300):
            pipe.set(f"seawall:cache:{{dd-many:{i}}}:value", b'0:0:"stale"')
        pipe.execute()
        refilled = time.monotonic() - started
        assert refilled < again - 0.2, f"the refill took {refilled:.2f} s: the test needs less"
        assert await items("get", 150) == "stale"
        for key in range(300):  # the second deletes go in batches, in no particular order
            await gone_after(items, key, started, again + 1.5)
        with pytest.raises(TypeError, match="a key must be str, bytes or int"):
            await items("delete_many", [1, 2, 3.5])

    run(scenario)


def test_again_after_is_checked_before_anything_is_deleted(target: Target, world: str) -> None:
    async def scenario() -> None:
        items = Api(target, world, "dd-bad")
        await items("set", 1, "one")
        for bad, error in (
            (0, ValueError),
            (-1, ValueError),
            (float("nan"), ValueError),
            ("1", TypeError),
            (True, TypeError),
        ):
            with pytest.raises(error, match="again_after of cache 'dd-bad'"):
                await items("delete", 1, again_after=bad)
        assert await items("get", 1) == "one"

    run(scenario)


@pytest.mark.serial  # a bound on when another process acts: alone, not beside the workers
def test_second_delete_survives_the_death_of_the_deleting_process(
    target: Target, world: str
) -> None:
    """The deleting process is SIGKILLed right after delete() returns: this process, which
    has a Cache of the namespace open, carries out the second delete in time."""

    async def scenario() -> None:
        again = 0.6
        here = Api(target, world, "dd-crash")
        await here("set", "row", "old")
        await here("get", "row")  # the cache is in use here: this process sweeps
        started = time.monotonic()
        dying = SPAWN.Process(
            target=consistencyworkers.delete_twice_then_die,
            args=(target.url, target.cluster, "dd-crash", "row", again),
        )
        dying.start()
        await asyncio.to_thread(dying.join, 30)
        assert dying.exitcode == -9
        await here("set", "row", "old (replica lag)")  # a lagging reader's fill
        took = await gone_after(here, "row", started, 30.0)
        spent_starting = time.monotonic() - started - took  # (the spawn is part of it)
        # Due `again` after the dead process's delete, which came after its start-up.
        print(f"second delete {took:.2f} s after the spawn ({spent_starting:.2f})")
        await schedule_emptied(target.sync(), "dd-crash")

    run(scenario)


def test_a_process_opening_the_cache_later_carries_out_overdue_deletes(
    target: Target, world: str
) -> None:
    async def scenario() -> None:
        admin = target.sync()
        dying = SPAWN.Process(
            target=consistencyworkers.delete_twice_then_die,
            args=(target.url, target.cluster, "dd-late", "row", 0.2),
        )
        dying.start()
        await asyncio.to_thread(dying.join, 30)
        assert dying.exitcode == -9
        # Nobody had the namespace open: the stale fill outlives the due time...
        admin.set("seawall:cache:{dd-late:row}:value", b'0:0:"stale"')
        await asyncio.sleep(0.5)
        assert admin.zcard(schedule_key("dd-late")) == 1
        # ...until a process opens a Cache of the namespace and uses it.
        late = Api(target, world, "dd-late", l1_size=0)
        opened = time.monotonic()
        await late("get", "other")
        await gone_after(late, "row", opened, GRACE + 1.0)
        await schedule_emptied(admin, "dd-late")

    run(scenario)
