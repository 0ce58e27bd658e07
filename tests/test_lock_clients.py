"""The lock with the clients users bring: Sentinel-managed, ACL users, RESP3."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import redis
from conftest import Target

import seawall


def test_lock_through_a_sentinel_managed_client(seawall_sentinel: Any) -> None:
    r = seawall_sentinel.master_client()
    lock = seawall.Lock(r, "sentinel-lock", ttl=1.0)
    got: list[float] = []

    def wait() -> None:
        other = seawall.Lock(seawall_sentinel.master_client(), "sentinel-lock", ttl=1.0)
        assert other.acquire(timeout=5)
        got.append(time.monotonic())
        other.release()

    with lock:
        waiter = threading.Thread(target=wait)
        waiter.start()
        time.sleep(1.5)  # longer than the ttl: renewal goes through the Sentinel client
        assert lock.owned()
        released_at = time.monotonic()
    waiter.join(5)
    assert got and got[0] - released_at < 0.2
    assert lock.fence >= 1


@pytest.mark.parametrize("protocol", [2, 3])
def test_lock_as_an_acl_user_limited_to_seawall_keys(standalone: Target, protocol: int) -> None:
    admin = standalone.sync()
    admin.acl_setuser(
        "app",
        enabled=True,
        passwords=["+app-secret"],
        keys=["seawall:*"],
        channels=["seawall:*"],
        commands=["+@all", "-flushall", "-flushdb"],
    )
    try:
        r = standalone.sync(username="app", password="app-secret", protocol=protocol)
        lock = seawall.Lock(r, "acl", ttl=1.0)
        waiter_took: list[int] = []

        def wait() -> None:
            other = seawall.Lock(
                standalone.sync(username="app", password="app-secret", protocol=protocol),
                "acl",
                ttl=1.0,
            )
            assert other.acquire(timeout=5)
            waiter_took.append(other.fence)
            other.release()

        with lock:
            waiter = threading.Thread(target=wait)
            waiter.start()
            time.sleep(0.3)
        waiter.join(5)
        assert waiter_took == [lock.fence + 1]
        with pytest.raises(redis.exceptions.NoPermissionError):
            r.set("not-seawall", "x")  # the ACL really is limited
    finally:
        admin.acl_deluser("app")


def test_cluster_wakeups_without_client_pubsub(seawall_cluster: Any) -> None:
    """redis-py < 8 has no pubsub() on asyncio cluster clients: a node's connection hears."""
    import asyncio

    import redis.asyncio.cluster

    from seawall.locks._async.waker import node_pubsub

    async def body() -> None:
        rc = redis.asyncio.cluster.RedisCluster.from_url(seawall_cluster.url)
        await rc.initialize()
        pubsub = node_pubsub(rc)
        await pubsub.subscribe("seawall:wake:test")
        assert (await pubsub.get_message(timeout=2))["type"] == "subscribe"
        # Published through another node than the one listening: cluster-wide delivery.
        for node in rc.get_primaries():
            await rc.publish("seawall:wake:test", node.name, target_nodes=node)
        heard = set()
        for _ in range(10):
            message = await pubsub.get_message(timeout=2)
            if message and message["type"] == "message":
                heard.add(message["data"].decode())
            if len(heard) == len(rc.get_primaries()):
                break
        assert heard == {node.name for node in rc.get_primaries()}
        await pubsub.aclose()
        await rc.aclose()

    asyncio.run(body())


def test_async_cluster_handover_through_a_node_connection(
    seawall_cluster: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    import redis.asyncio.cluster

    import seawall.aio
    from seawall.locks._async import waker

    monkeypatch.setattr(waker, "open_pubsub", waker.node_pubsub)  # as on redis-py < 8

    async def body() -> float:
        rc = redis.asyncio.cluster.RedisCluster.from_url(seawall_cluster.url)
        holder = seawall.aio.Lock(rc, "node-wake", ttl=30.0)
        await holder.acquire()
        got: list[float] = []

        async def wait() -> None:
            waiter = seawall.aio.Lock(rc, "node-wake", ttl=30.0)
            assert await waiter.acquire(timeout=10)
            got.append(time.monotonic())
            await waiter.release()

        task = asyncio.create_task(wait())
        await asyncio.sleep(0.5)  # queued; the holder's lease has ~30 s left
        released = time.monotonic()
        await holder.release()
        await asyncio.wait_for(task, 10)
        await rc.aclose()
        return got[0] - released

    assert asyncio.run(body()) < 0.2


# --- wake-ups that cannot be subscribed to ---------------------------------------------------


def _held_and_waiting(api: Any, kind: str, r: Any, ttl: float) -> tuple[Any, Any]:
    """A hold of `kind` that nobody renews or releases (as a dead process's would be), and
    a waiter for it; `api` is seawall or seawall.aio."""
    if kind == "lock":
        return api.Lock(r, "unheard", ttl=ttl, renew=False), api.Lock(r, "unheard", ttl=5.0)
    if kind == "rwlock":
        held = api.RWLock(r, "unheard", ttl=ttl, renew=False).read()
        return held, api.RWLock(r, "unheard", ttl=5.0).write()
    held = api.Semaphore(r, "unheard", 1, ttl=ttl, renew=False)
    return held, api.Semaphore(r, "unheard", 1, ttl=5.0)


@pytest.mark.parametrize("kind", ["lock", "rwlock", "semaphore"])
@pytest.mark.parametrize("world", ["sync", "async"])
def test_a_dead_holder_frees_the_lock_within_its_ttl_while_wake_ups_cannot_subscribe(
    standalone: Target, kind: str, world: str
) -> None:
    # The waiter's process listens for wake-ups before it queues; here it never can (the
    # ACL user has no channel rights, as a slow or refused subscription would be). A
    # holder that died still frees the lock when its lease ends: the waiter looks again
    # then, instead of after a full wait for the subscription (1 s).
    import asyncio

    import seawall.aio

    admin = standalone.sync()
    admin.acl_setuser(
        "deaf", enabled=True, passwords=["+deaf-secret"], keys=["*"], commands=["+@all"]
    )
    ttl = 0.3
    try:
        if world == "sync":
            held, waiting = _held_and_waiting(
                seawall, kind, standalone.sync(username="deaf", password="deaf-secret"), ttl
            )
            assert held.acquire()
            started = time.monotonic()
            assert waiting.acquire(timeout=5)
            took = time.monotonic() - started
        else:

            async def body() -> float:
                r = standalone.aio(username="deaf", password="deaf-secret")
                try:
                    held, waiting = _held_and_waiting(seawall.aio, kind, r, ttl)
                    assert await held.acquire()
                    started = time.monotonic()
                    assert await waiting.acquire(timeout=5)
                    return time.monotonic() - started
                finally:
                    await r.aclose()

            took = asyncio.run(body())
    finally:
        admin.acl_deluser("deaf")
    # The lease ends 0.3 s after the hold; without the bound the first look came after 1 s.
    assert took < ttl + 0.45, f"the waiter took {took:.2f} s"
