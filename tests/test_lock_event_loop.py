"""A sync seawall lock acquired on a thread that runs an asyncio event loop is refused,
with an error that names its asyncio twin.

A sync lock's owner is the thread: every task of that loop would be one owner, so the lock
could not keep them apart (a Lock told the second task it held the lock already and
advised seawall.RLock, which then let both tasks in), and its waits would block the loop.
Refused before any I/O, so most of these locks point at servers that are not there."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
import redis

import seawall
import seawall.etcd
import seawall.zookeeper

NOWHERE = redis.Redis(port=1)  # never reached: the refusal comes first


def sync_locks() -> dict[str, tuple[Callable[[], Any], str]]:
    """Each sync primitive (a factory), with the asyncio class its error must name."""
    return {
        "Lock": (lambda: seawall.Lock(NOWHERE, "loop"), "seawall.aio.Lock"),
        "RLock": (lambda: seawall.RLock(NOWHERE, "loop"), "seawall.aio.RLock"),
        "Semaphore": (lambda: seawall.Semaphore(NOWHERE, "loop", value=2), "seawall.aio.Semaphore"),
        "read": (lambda: seawall.RWLock(NOWHERE, "loop").read(), "seawall.aio.RWLock"),
        "write": (lambda: seawall.RWLock(NOWHERE, "loop").write(), "seawall.aio.RWLock"),
        "Redlock": (
            lambda: seawall.Redlock([NOWHERE, redis.Redis(port=2), redis.Redis(port=3)], "loop"),
            "seawall.aio.Redlock",
        ),
        "etcd": (
            lambda: seawall.etcd.Lock("http://127.0.0.1:1", "loop"),
            "seawall.etcd.aio.Lock",
        ),
        "zookeeper": (
            lambda: seawall.zookeeper.Lock("127.0.0.1:1", "loop"),
            "seawall.zookeeper.aio.Lock",
        ),
    }


@pytest.mark.parametrize("kind", list(sync_locks()))
def test_a_sync_lock_is_refused_on_a_running_event_loop(kind: str) -> None:
    make, twin = sync_locks()[kind]
    lock = make()

    async def main() -> None:
        for attempt in (lambda: lock.acquire(), lambda: lock.acquire(blocking=False)):
            with pytest.raises(seawall.LockError, match="asyncio event loop") as caught:
                attempt()
            assert twin in str(caught.value)
            assert caught.value.lock_name == "loop"
        with pytest.raises(seawall.LockError, match="asyncio event loop"), lock:
            pass

    asyncio.run(main())


@pytest.mark.parametrize("kind", ["Lock", "RLock"])
def test_tasks_sharing_a_sync_lock_are_pointed_to_the_asyncio_twin_never_to_rlock(
    seawall_redis: redis.Redis, kind: str
) -> None:
    """Two tasks of one loop share a sync lock: neither gets in, and neither is advised
    to use seawall.RLock (which would let both into the critical section)."""
    lock = getattr(seawall, kind)(seawall_redis, f"shared-by-tasks-{kind}", ttl=5.0)
    inside: list[str] = []

    async def task(me: str) -> str:
        try:
            with lock:
                inside.append(me)
                await asyncio.sleep(0.05)  # the other task runs now
                inside.remove(me)
        except seawall.LockError as exc:
            return str(exc)
        return "entered"

    async def main() -> list[str]:
        return await asyncio.gather(task("a"), task("b"))

    for message in asyncio.run(main()):
        assert f"seawall.aio.{kind}" in message
        assert "use seawall.RLock" not in message
    assert not lock.locked()


def test_a_worker_thread_of_the_loop_may_still_use_the_sync_lock(
    seawall_redis: redis.Redis,
) -> None:
    lock = seawall.Lock(seawall_redis, "from-a-worker-thread", ttl=5.0)

    def hold() -> int:
        with lock:
            return lock.fence

    async def main() -> int:
        return await asyncio.to_thread(hold)

    assert asyncio.run(main()) > 0
    assert not lock.locked()
