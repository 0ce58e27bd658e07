"""extend(ttl=) sets a lease, extend(additional=) adds to what is left of it.

redis-py's `lock.extend(t)` adds t seconds; seawall's positional `extend(t)` has always
set the lease to t, so a call ported from redis-py could shorten the lease it meant to
lengthen. Both are spelled out now, on every primitive that has extend, sync and
asyncio; `additional=` is added on the server, in the extend script, by its clock. The
positional form still sets, with a DeprecationWarning."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any

import pytest
import redis
import redis.asyncio

import seawall
import seawall.aio

KINDS = ["lock", "rlock", "semaphore", "read", "write"]
_names = itertools.count()


def build(kind: str, api: Any, client: Any, name: str) -> Any:
    options = {"ttl": 10.0, "renew": False}
    if kind == "lock":
        return api.Lock(client, name, **options)
    if kind == "rlock":
        return api.RLock(client, name, **options)
    if kind == "semaphore":
        return api.Semaphore(client, name, value=1, **options)
    rw = api.RWLock(client, name, **options)
    return rw.read() if kind == "read" else rw.write()


def lease_left(kind: str, lock: Any, r: redis.Redis) -> float:
    """Seconds the server has left of the single hold on `lock`."""
    if kind in ("lock", "rlock"):
        return int(r.pttl(lock.key)) / 1000
    if kind == "write":
        return int(r.pttl(lock.rwlock.keys.writer)) / 1000
    holders = lock.key if kind == "semaphore" else lock.rwlock.keys.readers
    ((_, score),) = r.zrange(holders, 0, -1, withscores=True)
    seconds, micros = r.time()
    # Scores are 1 ms past the lease's end (see semaphore_acquire.lua).
    return (score - 1 - (seconds * 1000 + micros // 1000)) / 1000


def check_extend(kind: str, world: str, url: str) -> None:
    r = redis.Redis.from_url(url)
    name = f"extend-{kind}-{next(_names)}"
    loop = asyncio.new_event_loop()
    if world == "sync":
        lock = build(kind, seawall, redis.Redis.from_url(url), name)

        def run(call: Callable[[], Any]) -> Any:
            return call()
    else:
        lock = build(kind, seawall.aio, redis.asyncio.Redis.from_url(url), name)

        def run(call: Callable[[], Any]) -> Any:
            return loop.run_until_complete(call())

    try:
        scenario(kind, lock, r, run)
    finally:
        loop.close()


def scenario(kind: str, lock: Any, r: redis.Redis, run: Callable[[Callable[[], Any]], Any]) -> None:
    def left() -> float:
        return lease_left(kind, lock, r)

    assert run(lock.acquire)
    run(lambda: lock.extend(ttl=2.0))  # set: 2 s from now
    assert 1.0 < left() <= 2.0
    run(lambda: lock.extend(additional=3.0))  # add: what is left (< 2 s) + 3 s
    assert 4.0 < left() <= 5.0, left()
    run(lambda: lock.extend(ttl=7.0))
    assert 6.0 < left() <= 7.0
    run(lock.extend)  # no argument: the hold's ttl, now 7 s
    assert 6.0 < left() <= 7.0
    with pytest.warns(DeprecationWarning, match=r"extend\(ttl=\.\.\.\).*additional="):
        run(lambda: lock.extend(3.0))  # positional: sets, as it always did
    assert 2.0 < left() <= 3.0
    with pytest.raises(TypeError, match="not both"):
        run(lambda: lock.extend(ttl=1.0, additional=1.0))
    with pytest.raises(ValueError, match="additional"):
        run(lambda: lock.extend(additional=0))
    assert 2.0 < left() <= 3.0  # refused calls changed nothing
    run(lock.release)
    with pytest.raises(seawall.LockNotOwnedError):
        run(lambda: lock.extend(additional=1.0))


@pytest.mark.parametrize("kind", KINDS)
def test_extend_sets_with_ttl_and_adds_with_additional(
    seawall_url: str, world: str, kind: str
) -> None:
    check_extend(kind, world, seawall_url)


def test_redlock_extend_adds_on_every_master(seawall_masters: list[Any], world: str) -> None:
    urls = [master.url for master in seawall_masters]
    admins = [redis.Redis.from_url(url) for url in urls]
    name = f"extend-redlock-{next(_names)}"

    def lefts(lock: Any) -> list[float]:
        return [int(admin.pttl(lock.key)) / 1000 for admin in admins]

    if world == "sync":
        lock = seawall.Redlock([redis.Redis.from_url(u) for u in urls], name, ttl=10.0, renew=False)
        assert lock.acquire()
        lock.extend(ttl=2.0)
        lock.extend(additional=3.0)
        assert all(4.0 < s <= 5.0 for s in lefts(lock)), lefts(lock)
        with pytest.warns(DeprecationWarning):
            lock.extend(1.5)
        assert all(1.0 < s <= 1.5 for s in lefts(lock)), lefts(lock)
        assert 0 < lock.validity() <= 1.5
        lock.release()
        return

    async def main() -> None:
        clients = [redis.asyncio.Redis.from_url(u) for u in urls]
        lock = seawall.aio.Redlock(clients, name, ttl=10.0, renew=False)
        assert await lock.acquire()
        await lock.extend(ttl=2.0)
        await lock.extend(additional=3.0)
        assert all(4.0 < s <= 5.0 for s in lefts(lock)), lefts(lock)
        # The validity counts from the shortest lease a master reported, less the drift.
        assert 3.5 < lock.validity() <= 5.0
        await lock.release()

    asyncio.run(main())
