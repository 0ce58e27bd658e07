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

    from seawall._async.waker import node_pubsub

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
    from seawall._async import waker

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
