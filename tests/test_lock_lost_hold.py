"""A caller whose hold was lost (its key deleted, a pause past the ttl, Redis away) may take
the lock again through the same object: the lost hold is forgotten, not reported as
"already held by this caller" (which ended `seawall follow` after any lost lease). A live
hold still is."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
import redis.asyncio

import seawall
import seawall.aio
from seawall.errors import LockError


def test_a_sync_lock_is_taken_again_after_its_hold_was_lost(seawall_redis: Any) -> None:
    lost = threading.Event()
    lock = seawall.Lock(seawall_redis, "lost-hold", ttl=0.6, on_lost=lambda _: lost.set())
    assert lock.acquire(timeout=1)
    with pytest.raises(LockError, match="already held by this caller"):
        lock.acquire(timeout=0.1)  # a live hold: a second acquire is a mistake
    seawall_redis.delete(lock.key)  # the lease is gone behind the holder's back
    assert lost.wait(5), "the renewer never noticed the lost lease"
    assert lock.acquire(timeout=2)  # was: LockError "already held by this caller"
    assert lock.owned()
    lock.release()
    assert not lock.locked()


def test_an_asyncio_lock_is_taken_again_after_its_hold_was_lost(seawall_url: str) -> None:
    async def scenario() -> None:
        r = redis.asyncio.Redis.from_url(seawall_url)
        lost = asyncio.Event()
        lock = seawall.aio.Lock(r, "lost-hold-aio", ttl=0.6, on_lost=lambda _: lost.set())
        assert await lock.acquire(timeout=1)
        await r.delete(lock.key)
        await asyncio.wait_for(lost.wait(), 5)
        assert await lock.acquire(timeout=2)
        await lock.release()
        await r.aclose()

    asyncio.run(scenario())


def test_a_redlock_is_taken_again_after_its_hold_was_lost(seawall_master_clients: Any) -> None:
    lost = threading.Event()
    lock = seawall.Redlock(
        seawall_master_clients, "lost-hold-redlock", ttl=0.6, on_lost=lambda _: lost.set()
    )
    assert lock.acquire(timeout=1)
    for client in seawall_master_clients:
        client.delete(*client.keys("*lost-hold-redlock*"))
    assert lost.wait(5), "the renewer never noticed the lost lease"
    assert lock.acquire(timeout=2)
    lock.release()
