"""`replicas=`: an acquisition counts only once N replicas acknowledged it; failovers."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
import redis
from conftest import Target

import seawall
import seawall.aio

# --- not enough replicas: a clear error, and nothing left held ------------------------------


@pytest.mark.parametrize("kind", ["Lock", "RLock"])
def test_too_few_replicas_fails_cleanly(target: Target, world: str, kind: str) -> None:
    # The single server has no replica; each master of the 3+3 cluster has exactly one, so
    # there replicas=1 must succeed (WAIT reached the key's own node) and replicas=2 fail.
    too_many = 2 if target.cluster else 1
    wait = 0.1
    r = target.sync()
    r.script_flush()  # the first try meets NOSCRIPT: the pipeline is sent again with EVAL

    def check_failure(error: seawall.LockNotReplicatedError, took: float) -> None:
        assert (error.lock_name, error.required, error.acked) == ("rep", too_many, too_many - 1)
        assert f"replicas={too_many}" in str(error)
        assert wait <= took < wait + 2.0
        assert r.exists(f"seawall:{kind.lower()}:{{rep}}") == 0  # not left held

    if world == "sync":
        lock = getattr(seawall, kind)(target.sync(), "rep", replicas=too_many, replica_timeout=wait)
        started = time.monotonic()
        with pytest.raises(seawall.LockNotReplicatedError) as caught:
            lock.acquire(blocking=False)
        check_failure(caught.value, time.monotonic() - started)
        assert not lock.owned() and not lock.locked()
        if target.cluster:
            ok = getattr(seawall, kind)(target.sync(), "rep", replicas=1, replica_timeout=5.0)
            with ok:
                assert ok.owned()
        assert target.lock_keys() == []
        return

    async def body() -> None:
        client = target.aio()
        lock = getattr(seawall.aio, kind)(client, "rep", replicas=too_many, replica_timeout=wait)
        started = time.monotonic()
        with pytest.raises(seawall.LockNotReplicatedError) as caught:
            await lock.acquire()
        check_failure(caught.value, time.monotonic() - started)
        assert not await lock.owned() and not await lock.locked()
        if target.cluster:
            ok = getattr(seawall.aio, kind)(client, "rep", replicas=1, replica_timeout=5.0)
            async with ok:
                assert await ok.owned()
        await client.aclose()

    asyncio.run(body())
    assert target.lock_keys() == []


def test_a_waiter_that_cannot_replicate_passes_the_lock_on(standalone: Target) -> None:
    """The failed acquisition is released with the usual release, which wakes the next."""
    r = standalone.sync()
    holder = seawall.Lock(r, "rep-wake", ttl=30.0)
    holder.acquire()
    outcome: dict[str, float] = {}

    def strict_waiter() -> None:
        lock = seawall.Lock(standalone.sync(), "rep-wake", replicas=1, replica_timeout=0.05)
        try:
            lock.acquire(timeout=10)
        except seawall.LockNotReplicatedError as exc:
            outcome["strict acked"] = exc.acked

    def plain_waiter() -> None:
        time.sleep(0.2)  # queued behind the strict waiter
        lock = seawall.Lock(standalone.sync(), "rep-wake", ttl=30.0)
        assert lock.acquire(timeout=10)
        outcome["plain acquired"] = time.monotonic()
        lock.release()

    threads = [threading.Thread(target=f) for f in (strict_waiter, plain_waiter)]
    for thread in threads:
        thread.start()
    time.sleep(0.5)
    released_at = time.monotonic()
    holder.release()
    for thread in threads:
        thread.join(15)
    assert outcome["strict acked"] == 0
    assert outcome["plain acquired"] - released_at < 1.5
    assert standalone.lock_keys() == []


# --- acceptance 7: the master SIGKILLed during a hold, under Sentinel -----------------------


def test_master_killed_during_a_replicated_hold(seawall_sentinel: Any) -> None:
    group = seawall_sentinel
    r = group.master_client(socket_timeout=1.0)
    # A plain Lock with replicas=1 succeeds: the group's replica acknowledges.
    with seawall.Lock(r, "plain", replicas=1, replica_timeout=2.0) as plain:
        assert plain.owned()

    lost: list[int] = []
    # Outlives the failover: must still be held afterwards, on the promoted replica.
    survivor = seawall.RLock(r, "survivor", ttl=8.0, replicas=1, replica_timeout=2.0)
    # Shorter than the failover: its holder must learn that it lost it.
    loser = seawall.RLock(
        r, "loser", ttl=0.5, replicas=1, replica_timeout=2.0, on_lost=lambda lk: lost.append(1)
    )
    for lock in (survivor, loser):
        assert lock.acquire(timeout=5)
        assert lock.acquire(timeout=5)  # re-entered: the count must survive too
        assert seawall.fenced_write(r, f"{lock.name}:account", "before", lock.fence)

    group.master.kill()
    killed_at = time.monotonic()
    host, port = group.wait_for_failover(timeout=30)
    failover_took = time.monotonic() - killed_at
    promoted = redis.Redis(host=host, port=port, socket_timeout=2.0)
    other = group.master_client(socket_timeout=1.0)

    # Each acquisition, fence counter included, reached the replica before it counted.
    for lock in (survivor, loser):
        assert int(promoted.get(f"{lock.key}:fence") or 0) >= lock.fence

    # The survivor: either found on the promoted replica, or its holder learns it lost it.
    if promoted.get(survivor.key) is not None:
        assert failover_took < survivor.ttl
        assert survivor.owned()
        assert promoted.hvals(survivor.holds_key) == [b"2"]  # the count came along
        assert not seawall.RLock(other, "survivor").acquire(blocking=False)
        survivor.release()
        assert survivor.owned()  # still held once
        survivor.release()
    else:
        assert not survivor.owned()
        with pytest.raises(seawall.LockNotOwnedError):
            survivor.release()

    # The loser: its lease ran out during the failover, and it learns so.
    deadline = time.monotonic() + 5
    while not lost and time.monotonic() < deadline:
        time.sleep(0.05)
    assert lost == [1], "on_lost did not fire for a lease lost during the failover"
    assert not loser.owned()
    for survivor_or_loser in (survivor, loser):
        successor = seawall.RLock(other, survivor_or_loser.name, ttl=5.0)
        assert successor.acquire(timeout=5)
        assert successor.fence > survivor_or_loser.fence
        account = f"{survivor_or_loser.name}:account"
        assert seawall.fenced_write(other, account, "successor", successor.fence)
        # The stale holder's late write is rejected by the fence.
        assert not seawall.fenced_write(r, account, "stale", survivor_or_loser.fence)
        assert seawall.fenced_read(other, account)[0] == b"successor"
        successor.release()
    with pytest.raises(seawall.LockNotOwnedError):
        loser.release()
    for client in (r, other, promoted):
        client.close()
