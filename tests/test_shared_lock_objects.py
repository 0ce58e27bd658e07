"""One lock object shared by threads (sync) or asyncio tasks, as a threading.Lock is shared.

Owner A takes the hold with a short lease and no renewal, pauses past the lease, and
owner B then takes it through the SAME object. A must keep its own (old) fence, its
release and extend must fail without touching B's hold, B must own it and a third client
must stay out. Every primitive of the lock family, in both worlds, on real servers.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any

import pytest
import redis
import redis.asyncio
from conftest import Target
from owners import TaskOwner, ThreadOwner

import seawall
import seawall.aio

TTL = 0.3  # A's lease, never renewed
# A Redlock's lease is counted on the client from before its round over five masters, and
# B's hold (through the same object, so with the same lease) must live until B extends it:
# a loaded machine can spend 0.3 s between the two.
REDLOCK_TTL = 1.5
_names = itertools.count()


def build(kind: str, client: Any, name: str, aio: bool, **options: Any) -> Any:
    """The shared object of `kind` (for "read"/"write": that side of an RWLock)."""
    api: Any = seawall.aio if aio else seawall
    if kind == "lock":
        return api.Lock(client, name, **options)
    if kind == "rlock":
        return api.RLock(client, name, **options)
    if kind == "semaphore":
        return api.Semaphore(client, name, value=1, **options)
    if kind == "redlock":
        return api.Redlock(client, name, **options)
    rwlock = api.RWLock(client, name, **options)
    return rwlock.read() if kind == "read" else rwlock.write()


def blocker_of(kind: str) -> str:
    """What a third client tries while B holds `kind`: a writer keeps readers' company out."""
    return "write" if kind == "read" else kind


async def scenario(kind: str, aio: bool, client: Any, third_client: Any) -> None:
    name = f"shared-{kind}-{next(_names)}"
    ttl = REDLOCK_TTL if kind == "redlock" else TTL
    shared = build(kind, client, name, aio, ttl=ttl, renew=False)
    third = build(blocker_of(kind), third_client, name, aio, ttl=5.0)
    make = TaskOwner if aio else ThreadOwner
    a, b, outsider = make(), make(), make()

    def call(method: str, *args: Any, target: Any = shared) -> Callable[[], Any]:
        return lambda: getattr(target, method)(*args)

    def read_fence() -> Callable[[], Any]:
        return lambda: shared.fence

    try:
        assert await a.do(call("acquire"))
        fence_a = await a.do(read_fence())
        lapsed_by = asyncio.get_running_loop().time() + ttl + 5.0
        while await a.do(call("owned")):  # A pauses past its lease; owned() turns False
            assert asyncio.get_running_loop().time() < lapsed_by, "A's lease never lapsed"
            await asyncio.sleep(0.02)
        if kind == "read":
            # A writer between the two reads gives B's read a newer fence than A's.
            assert await outsider.do(call("acquire", True, 5.0, target=third))
            await outsider.do(call("release", target=third))
        assert await b.do(call("acquire", True, 5.0))
        # B's hold must outlast the checks below on a loaded machine (the object's ttl is
        # A's short one, unrenewed).
        await b.do(lambda: shared.extend(ttl=60.0))
        fence_b = await b.do(read_fence())
        assert fence_b > fence_a

        assert await a.do(read_fence()) == fence_a  # A still sees its own fence
        assert not await a.do(call("owned"))
        assert await b.do(call("owned"))
        with pytest.raises(seawall.LockNotOwnedError):
            await a.do(call("release"))
        with pytest.raises(seawall.LockNotOwnedError):
            await a.do(call("extend"))
        # A's failed calls left B's hold alone.
        assert await b.do(call("owned"))
        assert await b.do(read_fence()) == fence_b
        assert not await outsider.do(call("acquire", False, target=third))

        await b.do(call("release"))
        # Free again (B's hold would outlast this wait: its lease is 60 s). Waiting, not one
        # try: a Redlock's single try can miss its quorum on a loaded machine when masters
        # answer after its node timeout.
        assert await outsider.do(call("acquire", True, 30.0, target=third))
        await outsider.do(call("release", target=third))
    finally:
        for owner in (a, b, outsider):
            await owner.close()


KINDS = ["lock", "rlock", "semaphore", "read", "write"]


@pytest.mark.parametrize("kind", KINDS)
def test_stale_owner_keeps_its_fence_and_cannot_touch_the_new_hold(
    target: Target, world: str, kind: str
) -> None:
    if world == "sync":
        asyncio.run(scenario(kind, False, target.sync(), target.sync()))
        return

    async def body() -> None:
        client, third_client = target.aio(), target.aio()
        try:
            await scenario(kind, True, client, third_client)
        finally:
            await client.aclose()
            await third_client.aclose()

    asyncio.run(body())


def test_redlock_stale_owner_keeps_its_fence(seawall_masters: list[Any], world: str) -> None:
    urls = [master.url for master in seawall_masters]
    if world == "sync":
        masters = [redis.Redis.from_url(url) for url in urls]
        for master in masters:
            master.flushall()
        others = [redis.Redis.from_url(url) for url in urls]
        try:
            asyncio.run(scenario("redlock", False, masters, others))
        finally:
            for master in masters + others:
                master.close()
        return

    async def body() -> None:
        masters = [redis.asyncio.Redis.from_url(url) for url in urls]
        others = [redis.asyncio.Redis.from_url(url) for url in urls]
        try:
            for master in masters:
                await master.flushall()
            await scenario("redlock", True, masters, others)
        finally:
            for master in masters + others:
                await master.aclose()

    asyncio.run(body())


@pytest.mark.parametrize("aio", [False, True], ids=["sync", "async"])
def test_semaphore_object_gives_a_permit_to_each_owner(standalone: Target, aio: bool) -> None:
    """Several owners hold permits through ONE Semaphore object, like threading.Semaphore."""

    async def body(client: Any) -> None:
        api: Any = seawall.aio if aio else seawall
        semaphore = api.Semaphore(client, "shared-permits", value=2, ttl=5.0)
        make = TaskOwner if aio else ThreadOwner
        owners = [make() for _ in range(3)]
        try:
            assert await owners[0].do(lambda: semaphore.acquire(False))
            assert await owners[1].do(lambda: semaphore.acquire(False))
            assert not await owners[2].do(lambda: semaphore.acquire(False))
            held = semaphore.holders()
            assert (await held if aio else held) == 2
            await owners[0].do(semaphore.release)
            assert await owners[2].do(lambda: semaphore.acquire(True, 5.0))
            with pytest.raises(seawall.LockNotOwnedError):
                await owners[0].do(semaphore.release)  # gave its permit back already
            await owners[1].do(semaphore.release)
            await owners[2].do(semaphore.release)
        finally:
            for owner in owners:
                await owner.close()

    if not aio:
        asyncio.run(body(standalone.sync()))
        return

    async def run_async() -> None:
        client = standalone.aio()
        try:
            await body(client)
        finally:
            await client.aclose()

    asyncio.run(run_async())


@pytest.mark.parametrize("kind", ["lock", "rlock", "semaphore", "write"])
def test_a_hold_taken_in_a_finished_task_is_released_by_the_next_task(
    standalone: Target, kind: str
) -> None:
    """asyncio.wait_for(lock.acquire(), t) acquires in a task of its own on Python 3.11:
    the hold passes to the caller, which reads its fence and releases it; the lock is then
    free for another process (nothing left renewing a forgotten hold)."""

    async def body() -> None:
        client = standalone.aio()
        shared = build(kind, client, f"wait-for-{kind}", True, ttl=5.0)
        other = build(kind, client, f"wait-for-{kind}", True, ttl=5.0)
        try:
            await asyncio.create_task(shared.acquire())  # finishes while holding
            assert shared.fence > 0
            assert await shared.owned()
            await shared.release()
            assert await other.acquire(blocking=False)
            await other.release()
        finally:
            await client.aclose()

    asyncio.run(body())
