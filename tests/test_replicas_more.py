"""`replicas=` on Semaphore and RWLock; Semaphore, RWLock and RLock through Sentinel clients."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import redis.asyncio.sentinel
from conftest import Target
from waiting import wait_until

import seawall
import seawall.aio
from seawall.locks._async import semaphore as async_semaphore
from seawall.locks._sync import semaphore as sync_semaphore
from seawall.shared._keys import rwlock_keys

KINDS = ["Semaphore", "read", "write"]


def make(module: Any, kind: str, client: Any, name: str, **options: Any) -> Any:
    """A Semaphore (one permit), or the read or write side of an RWLock."""
    if kind == "Semaphore":
        return module.Semaphore(client, name, value=1, **options)
    rwlock = module.RWLock(client, name, **options)
    return rwlock.read() if kind == "read" else rwlock.write()


@pytest.fixture
def slow_semaphore_recheck(monkeypatch: pytest.MonkeyPatch) -> None:
    """A queued semaphore waiter looks again every 0.4 s even unwoken, too often for a
    timing test to tell a wake-up from a re-check: make that 1.2 s (still inside the 1.5 s
    after which a silent waiter is dropped from the queue)."""
    monkeypatch.setattr(sync_semaphore, "WAITER_SLICE", 1.2)
    monkeypatch.setattr(async_semaphore, "WAITER_SLICE", 1.2)


# --- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["Semaphore", "RWLock"])
@pytest.mark.parametrize(
    ("options", "error", "words"),
    [
        ({"replicas": -1}, ValueError, "replicas of {what} must be >= 0"),
        ({"replicas": 1.0}, TypeError, "replicas of {what} must be an int"),
        ({"replicas": True}, TypeError, "replicas of {what} must be an int"),
        ({"replicas": 1, "replica_timeout": 0}, ValueError, "replica_timeout of {what}"),
        ({"replicas": 1, "replica_timeout": "1"}, TypeError, "replica_timeout of {what}"),
    ],
)
def test_bad_replica_options_are_refused_naming_the_primitive(
    standalone: Target,
    world: str,
    kind: str,
    options: dict[str, Any],
    error: type[Exception],
    words: str,
) -> None:
    module = seawall if world == "sync" else seawall.aio
    client = standalone.sync() if world == "sync" else redis.asyncio.Redis.from_url(standalone.url)
    what = f"{kind.lower()} 'bad'"
    with pytest.raises(error) as caught:
        getattr(module, kind)(client, "bad", **options)
    assert words.format(what=what) in str(caught.value)


# --- too few replicas: a clear error, and nothing left held ----------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_too_few_replicas_fails_cleanly(target: Target, world: str, kind: str) -> None:
    # The single server has no replica; each master of the 3+3 cluster has exactly one, so
    # there replicas=1 must succeed (WAIT went to the key's own node) and replicas=2 fail.
    too_many = 2 if target.cluster else 1
    wait = 0.1

    def check_failure(error: seawall.LockNotReplicatedError, took: float) -> None:
        assert (error.lock_name, error.required, error.acked) == ("rep", too_many, too_many - 1)
        assert f"replicas={too_many}" in str(error)
        side = "permit of semaphore" if kind == "Semaphore" else f"{kind} side of rwlock"
        assert f"{side} 'rep'" in str(error)
        assert wait <= took < wait + 2.0
        assert target.lock_keys() == []  # no holder, no queue entry left

    if world == "sync":
        held = make(seawall, kind, target.sync(), "rep", replicas=too_many, replica_timeout=wait)
        started = time.monotonic()
        with pytest.raises(seawall.LockNotReplicatedError) as caught:
            held.acquire(blocking=False)
        check_failure(caught.value, time.monotonic() - started)
        assert not held.owned()
        if target.cluster:
            ok = make(seawall, kind, target.sync(), "rep", replicas=1, replica_timeout=5.0)
            with ok:
                assert ok.owned()
        assert target.lock_keys() == []
        return

    async def body() -> None:
        client = target.aio()
        held = make(seawall.aio, kind, client, "rep", replicas=too_many, replica_timeout=wait)
        started = time.monotonic()
        with pytest.raises(seawall.LockNotReplicatedError) as caught:
            await held.acquire(timeout=5)  # blocking: the first try takes it, then fails
        check_failure(caught.value, time.monotonic() - started)
        assert not await held.owned()
        if target.cluster:
            ok = make(seawall.aio, kind, client, "rep", replicas=1, replica_timeout=5.0)
            async with ok:
                assert await ok.owned()
        await client.aclose()

    asyncio.run(body())
    assert target.lock_keys() == []


# Who holds first, who then waits and cannot replicate, and who waits behind it; each
# arrangement makes the strict waiter the one the release lets in, so the plain waiter gets
# in fast only if the strict one gave its grant back and passed the wake-up on.
PASS_ON = {
    "Semaphore": ("Semaphore", "Semaphore", "Semaphore"),  # first come, first served
    "read": ("write", "read", "write"),  # a write release lets the waiting readers in
    "write": ("read", "write", "read"),  # the last reader wakes the writer, held back by it
}


@pytest.mark.parametrize("kind", KINDS)
def test_a_waiter_that_cannot_replicate_passes_it_on(
    standalone: Target, kind: str, slow_semaphore_recheck: None
) -> None:
    holder_kind, strict_kind, plain_kind = PASS_ON[kind]
    holder = make(seawall, holder_kind, standalone.sync(), "pass", ttl=30.0)
    assert holder.acquire(blocking=False)
    outcome: dict[str, float] = {}

    def strict_waiter() -> None:
        strict = make(
            seawall, strict_kind, standalone.sync(), "pass", replicas=1, replica_timeout=0.05
        )
        try:
            strict.acquire(timeout=10)
        except seawall.LockNotReplicatedError as exc:
            outcome["strict acked"] = exc.acked  # raised only after it was let in

    def queued() -> int:
        """Waiters in the lock's queues (the strict waiter's first, then the plain one's)."""
        client = standalone.sync()
        return sum(client.zcard(key) for key in standalone.lock_keys() if key.endswith("waiters"))

    def plain_waiter() -> None:
        # Behind the strict waiter: a fixed head start let a loaded machine queue it second.
        wait_until(lambda: queued() >= 1, 30, "the strict waiter queues")
        plain = make(seawall, plain_kind, standalone.sync(), "pass", ttl=30.0)
        assert plain.acquire(timeout=10)
        outcome["plain acquired"] = time.monotonic()
        outcome["plain fence"] = plain.fence
        plain.release()

    threads = [threading.Thread(target=f) for f in (strict_waiter, plain_waiter)]
    for thread in threads:
        thread.start()
    wait_until(lambda: queued() >= 2, 30, "both waiters queue")
    released_at = time.monotonic()
    holder.release()
    for thread in threads:
        thread.join(15)
    assert outcome["strict acked"] == 0
    # The strict waiter was let in before the plain one (fences tell where they count write
    # holds or permits: the strict grant took one in between) and gave it back, waking it.
    if kind == "Semaphore":
        assert outcome["plain fence"] == holder.fence + 2
    if kind == "write":
        # The reader saw the strict writer's hold: the counter's only value so far.
        assert outcome["plain fence"] == int(standalone.sync().get(rwlock_keys("pass").fence))
    assert outcome["plain acquired"] - released_at < 0.6, "the wake-up was not passed on"
    assert standalone.lock_keys() == []


# --- through Sentinel-managed clients ---------------------------------------------------------

# How soon a blocked waiter must get in after the release: a lost wake-up would leave it to
# its fallback re-check (1.2 s and more for these waiters, see slow_semaphore_recheck).
FAST = 0.3


def _leftovers(client: Any) -> list[bytes]:
    """Keys left but those that outlive holds on purpose and expire by themselves (fence
    counters, memories of releases, a Lock's queue marker)."""

    def kept(key: bytes) -> bool:
        return key.endswith((b":fence", b":released", b":queued")) or b":released:" in key

    assert all(client.pttl(k) != -1 for k in client.keys("seawall:*") if kept(k))
    return sorted(k for k in client.keys("seawall:*") if not kept(k))


def test_primitives_through_a_sentinel_managed_client(
    seawall_sentinel: Any, slow_semaphore_recheck: None
) -> None:
    group = seawall_sentinel
    r = group.master_client()
    clients = [r]

    def own_client() -> Any:
        client = group.master_client()  # a client per waiter: a process of its own
        clients.append(client)
        return client

    def handover(holder: Any, make_waiter: Callable[[Any], Any], depth: int = 1) -> float:
        """The holder releases while a waiter blocks in another thread; how long it took."""
        got: list[float] = []

        def wait() -> None:
            waiter = make_waiter(own_client())
            assert waiter.acquire(timeout=10)
            got.append(time.monotonic())
            waiter.release()

        thread = threading.Thread(target=wait)
        thread.start()
        time.sleep(0.3)  # the waiter has tried, subscribed and queued
        assert holder.owned()
        released_at = time.monotonic()
        for _ in range(depth):
            holder.release()
        thread.join(10)
        return got[0] - released_at

    took: dict[str, float] = {}
    # Holders need replicas=1 (the group's replica acknowledges); waiters use plain tries.
    sem = seawall.Semaphore(r, "sem", value=1, ttl=30.0, replicas=1, replica_timeout=2.0)
    sem_fences = []
    for round_ in range(3):
        assert sem.acquire(timeout=5)
        sem_fences.append(sem.fence)
        took[f"semaphore {round_}"] = handover(
            sem, lambda c: seawall.Semaphore(c, "sem", value=1, ttl=30.0)
        )
    rw = seawall.RWLock(r, "rw", ttl=30.0, replicas=1, replica_timeout=2.0)
    writer, reader = rw.write(), rw.read()
    assert writer.acquire(timeout=5)
    took["writer to reader"] = handover(writer, lambda c: seawall.RWLock(c, "rw", ttl=30.0).read())
    assert reader.acquire(timeout=5)
    took["reader to writer"] = handover(reader, lambda c: seawall.RWLock(c, "rw", ttl=30.0).write())
    rlock = seawall.RLock(r, "rl", ttl=30.0, replicas=1, replica_timeout=2.0)
    assert rlock.acquire(timeout=5) and rlock.acquire(timeout=5)
    took["rlock"] = handover(rlock, lambda c: seawall.RLock(c, "rl", ttl=30.0), depth=2)

    assert max(took.values()) < FAST, took
    assert [f - sem_fences[0] for f in sem_fences] == [0, 2, 4]  # waiters took 1, 3
    assert _leftovers(r) == []
    for client in clients:
        client.close()


def test_primitives_through_an_asyncio_sentinel_client(
    seawall_sentinel: Any, slow_semaphore_recheck: None
) -> None:
    group = seawall_sentinel

    async def body() -> tuple[dict[str, float], float]:
        sentinel = redis.asyncio.sentinel.Sentinel(group.sentinel_addresses, socket_timeout=2.0)
        r = sentinel.master_for(group.service_name)
        clients = [r]

        def own_client() -> Any:
            client = sentinel.master_for(group.service_name)  # a waker of its own
            clients.append(client)
            return client

        async def handover(holder: Any, make_waiter: Callable[[Any], Any], depth: int = 1) -> float:
            got: list[float] = []

            async def wait() -> None:
                waiter = make_waiter(own_client())
                assert await waiter.acquire(timeout=10)
                got.append(time.monotonic())
                await waiter.release()

            task = asyncio.create_task(wait())
            await asyncio.sleep(0.3)
            assert await holder.owned()
            released_at = time.monotonic()
            for _ in range(depth):
                await holder.release()
            await asyncio.wait_for(task, 10)
            return got[0] - released_at

        async def run(acquire: Awaitable[bool]) -> None:
            assert await acquire

        took: dict[str, float] = {}
        aio = seawall.aio
        sem = aio.Semaphore(r, "sem", value=1, ttl=30.0, replicas=1, replica_timeout=2.0)
        sem_fences = []
        for round_ in range(3):
            await run(sem.acquire(timeout=5))
            sem_fences.append(sem.fence)
            took[f"semaphore {round_}"] = await handover(
                sem, lambda c: aio.Semaphore(c, "sem", value=1, ttl=30.0)
            )
        rw = aio.RWLock(r, "rw", ttl=30.0, replicas=1, replica_timeout=2.0)
        writer, reader = rw.write(), rw.read()
        await run(writer.acquire(timeout=5))
        took["writer to reader"] = await handover(
            writer, lambda c: aio.RWLock(c, "rw", ttl=30.0).read()
        )
        await run(reader.acquire(timeout=5))
        took["reader to writer"] = await handover(
            reader, lambda c: aio.RWLock(c, "rw", ttl=30.0).write()
        )
        rlock = aio.RLock(r, "rl", ttl=30.0, replicas=1, replica_timeout=2.0)
        await run(rlock.acquire(timeout=5))
        await run(rlock.acquire(timeout=5))
        took["rlock"] = await handover(rlock, lambda c: aio.RLock(c, "rl", ttl=30.0), depth=2)
        assert [f - sem_fences[0] for f in sem_fences] == [0, 2, 4]  # waiters took 1, 3
        for client in clients:
            await client.aclose()
        for connection in sentinel.sentinels:
            await connection.aclose()
        return took, time.monotonic()

    took, finished = asyncio.run(body())
    # Closing the loop cancels the wakers' listeners: one whose cancellation redis-py turned
    # into a ConnectionError used to reconnect and keep asyncio.run() waiting for 10 s.
    assert time.monotonic() - finished < 3.0, "a waker outlived its cancellation"
    assert max(took.values()) < FAST, took
    with group.master_client() as r:
        assert _leftovers(r) == []
