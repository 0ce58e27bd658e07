"""The delayed double delete from Django (docs/django.md, "Keeping cached rows right"):
tests/djangosite's post_save handler deletes a product's cache entry after the commit and
again `again_after` later, against a real Redis, with SQLite models: a primary and a
replica that lags. A reader that fills the cache from the replica after the first delete
leaves a stale entry that only the second delete removes; the second delete happens even
when the process that scheduled it died at once."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import djangositeworkers
import djangoworkers
import redis
from conftest import SPAWN

djangoworkers.setup("redis://unused", "django.core.cache.backends.locmem.LocMemCache")

from seawall.django import RedisCache  # noqa: E402
from seawall.django._local import MISSING  # noqa: E402

AGAIN_AFTER = 0.5
# The second delete is carried out within 0.5 s of its due time (seawall.Cache's sweeper
# looks at the schedule that often); the bound leaves room for a loaded machine.
BOUND = AGAIN_AFTER + 3.0
OLD = {"name": "old", "price": 10}
NEW = {"name": "new", "price": 10}


def _in_a_process(function: Any, *args: Any) -> Any:
    with SPAWN.Pool(1) as pool:
        return pool.apply(function, args)


def test_the_second_delete_removes_a_fill_from_a_lagging_replica(
    seawall_url: str, tmp_path: Path
) -> None:
    seen = _in_a_process(djangositeworkers.replica_lag, seawall_url, str(tmp_path), 0.5, BOUND)
    assert seen["stale"] == OLD, "the race did not happen: the test proves nothing"
    assert seen["gone"], f"the stale entry outlived again_after + {BOUND - AGAIN_AFTER} s"
    assert seen["after"] == NEW


def test_a_single_delete_leaves_the_fill_from_a_lagging_replica(
    seawall_url: str, tmp_path: Path
) -> None:
    # The same scenario with a plain delete: the old row stays for the entry's timeout.
    bound = AGAIN_AFTER + 1.0
    seen = _in_a_process(djangositeworkers.replica_lag, seawall_url, str(tmp_path), None, bound)
    assert seen == {"stale": OLD, "gone": False, "after": OLD}


def test_the_second_delete_happens_when_its_process_died(seawall_url: str, tmp_path: Path) -> None:
    # This process serves the schedule from its first cache call, as every worker does.
    cache = RedisCache(seawall_url, {})
    assert cache.get("product:1") is None
    died = SPAWN.Process(target=djangositeworkers.save_and_die, args=(seawall_url, str(tmp_path)))
    died.start()
    died.join(30)
    assert died.exitcode == 0
    admin = redis.Redis.from_url(seawall_url)
    assert admin.zcard("seawall:cache-again:{seawall.django}") == 1, "no second delete recorded"
    # A late fill of the old row, after the first delete.
    cache.set("product:1", OLD)
    deadline = time.monotonic() + BOUND
    while cache.get("product:1") is not None:
        assert time.monotonic() < deadline, "the dead process's second delete never happened"
        time.sleep(0.02)
    # Done and then taken off the schedule (the entry goes after the delete it records).
    while admin.zcard("seawall:cache-again:{seawall.django}"):
        assert time.monotonic() < deadline, "the second delete stayed scheduled"
        time.sleep(0.02)
    admin.close()


def test_adelete_schedules_the_second_delete_on_the_event_loop(seawall_url: str) -> None:
    cache = RedisCache(seawall_url, {})

    async def scenario() -> None:
        await cache.aset("product:1", OLD)
        await cache.aset("product:2", OLD)
        assert await cache.adelete("product:1", again_after=AGAIN_AFTER)
        await cache.adelete_many(["product:2"], again_after=AGAIN_AFTER)
        await cache.aset_many({"product:1": OLD, "product:2": OLD})  # late fills
        deadline = time.monotonic() + BOUND
        while await cache.aget_many(["product:1", "product:2"]):
            assert time.monotonic() < deadline, "the second deletes never happened"
            await asyncio.sleep(0.02)

    asyncio.run(scenario())


def test_the_second_delete_reaches_an_l1_whichever_cache_carries_it_out(
    seawall_url: str,
) -> None:
    # Two caches of one process on one Redis, the first without an L1: the second delete
    # is carried out by a deleter of either, and must still drop the other's L1 copy.
    plain = RedisCache(seawall_url, {})
    assert plain.get("product:1") is None
    held = RedisCache(seawall_url, {"OPTIONS": {"l1_size": 100, "l1_ttl": 60.0}})
    local = held._x.local()
    assert local is not None
    held.set("product:1", OLD)
    deadline = time.monotonic() + 10
    while local.get(held.make_key("product:1")) is MISSING:
        assert time.monotonic() < deadline, "the L1 never held the value"
        assert held.get("product:1") == OLD
        time.sleep(0.01)
    plain.delete("product:1", again_after=AGAIN_AFTER)
    deadline = time.monotonic() + BOUND
    while held.get("product:1") is not None:
        assert time.monotonic() < deadline, "the L1 copy outlived the second delete"
        time.sleep(0.02)
