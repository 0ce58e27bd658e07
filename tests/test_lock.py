"""seawall.Lock and seawall.aio.Lock against real servers: one server and the 3+3 cluster."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from typing import Any

import pytest
from conftest import Target
from forked import FORKSERVER
from lockworkers import count_under_lock, counter_key, holder

import seawall
import seawall.aio
from seawall.locks._async.renewer import get_renewer as get_async_renewer
from seawall.locks._sync.renewer import get_renewer


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# --- acceptance 1: mutual exclusion, 4 processes x 2,500 acquisitions ---------------------


def test_mutual_exclusion_across_processes(target: Target, world: str) -> None:
    # 2,500 each on one server; on Cluster, where the same scripts only route differently
    # (and each acquisition costs twice the time), 1,000 each.
    per_process, processes = (1000 if target.cluster else 2500), 4
    with FORKSERVER.Pool(processes) as pool:
        ledgers = pool.starmap(
            count_under_lock,
            [(target.url, target.cluster, world, "mx", per_process, 5.0)] * processes,
        )
    assert int(target.sync().get(counter_key("mx"))) == per_process * processes
    intervals = sorted(interval for ledger in ledgers for interval in ledger)
    assert len(intervals) == per_process * processes
    overlaps = sum(1 for a, b in itertools.pairwise(intervals) if b[0] < a[1])
    assert overlaps == 0
    assert target.lock_keys() == []


# --- acceptance 2: a holder killed with SIGKILL --------------------------------------------


def test_holder_killed_lock_free_within_ttl(target: Target, world: str) -> None:
    ttl = 1.0
    parent_end, child_end = FORKSERVER.Pipe()
    child = FORKSERVER.Process(
        target=holder, args=(target.url, target.cluster, world, "killed", ttl, child_end)
    )
    child.start()
    try:
        parent_end.send(("acquire",))
        assert parent_end.poll(20), "holder did not acquire"
        _, dead_fence = parent_end.recv()
        # The waiter's client is connected (on Cluster: its slot map read) before the kill,
        # so the time measured is the lock's, not a connection's set-up on a busy machine.
        if world == "sync":
            client = target.sync()
            client.ping()
            lock = seawall.Lock(client, "killed", ttl=ttl)
            child.kill()
            killed_at = time.monotonic()
            assert lock.acquire(timeout=ttl + 2)
            waited = time.monotonic() - killed_at
            fence = lock.fence
            lock.release()
        else:

            async def take() -> tuple[float, int]:
                r = target.aio()
                await r.ping()
                lock = seawall.aio.Lock(r, "killed", ttl=ttl)
                child.kill()
                killed_at = time.monotonic()
                assert await lock.acquire(timeout=ttl + 2)
                waited = time.monotonic() - killed_at
                await lock.release()
                await r.aclose()
                return waited, lock.fence

            waited, fence = run(take())
    finally:
        child.kill()
        child.join(5)
    assert waited <= ttl + 0.5
    assert fence > dead_fence


# --- acceptance 4: a non-owner never touches another owner's lock --------------------------


def test_expired_owner_cannot_release_or_extend_new_holder(target: Target, world: str) -> None:
    if world == "sync":
        r = target.sync()
        a = seawall.Lock(r, "shared", ttl=0.2, renew=False)
        b = seawall.Lock(r, "shared", ttl=10.0)
        assert a.acquire()
        time.sleep(0.3)
        assert b.acquire(blocking=False)
        with pytest.raises(seawall.LockNotOwnedError, match="'shared'"):
            a.release()
        assert b.owned()
        assert a.acquire(blocking=False) is False
        with pytest.raises(seawall.LockNotOwnedError):
            a.extend(ttl=100)
        assert b.owned()
        assert r.pttl(b.key) > 9000  # a's extend did not shorten or lengthen b's lease
        b.release()
        assert not b.locked()
        return

    async def body() -> None:
        r = target.aio()
        a = seawall.aio.Lock(r, "shared", ttl=0.2, renew=False)
        b = seawall.aio.Lock(r, "shared", ttl=10.0)
        assert await a.acquire()
        await asyncio.sleep(0.3)
        assert await b.acquire(blocking=False)
        with pytest.raises(seawall.LockNotOwnedError, match="'shared'"):
            await a.release()
        assert await b.owned()
        with pytest.raises(seawall.LockNotOwnedError):
            await a.extend(ttl=100)
        assert await b.owned()
        assert await r.pttl(b.key) > 9000
        await b.release()
        assert not await b.locked()
        await r.aclose()

    run(body())


# --- acceptance 5: renewal keeps a lock; cycles leave nothing behind ------------------------


# Leases of a fraction of a second, renewed at a third of that: a latency bound, measured
# alone after the parallel part (`scripts/dev.py test`), as the other serial tests are.
@pytest.mark.serial
def test_renewal_keeps_a_short_lock(target: Target, world: str) -> None:
    if world == "sync":
        r = target.sync()
        other = seawall.Lock(target.sync(), "renewed", ttl=1.0)
        lock = seawall.Lock(r, "renewed", ttl=1.0)
        assert lock.acquire()
        stolen = 0
        until = time.monotonic() + 3.5  # three and a half leases
        while time.monotonic() < until:
            if other.acquire(blocking=False):
                stolen += 1
                other.release()
            time.sleep(0.05)
        assert stolen == 0
        assert lock.owned()
        lock.release()
        assert r.exists(lock.key) == 0
        assert get_renewer().active() == 0
        return

    async def body() -> None:
        r = target.aio()
        r2 = target.aio()
        other = seawall.aio.Lock(r2, "renewed", ttl=1.0)
        lock = seawall.aio.Lock(r, "renewed", ttl=1.0)
        assert await lock.acquire()
        stolen = 0
        until = time.monotonic() + 3.5
        while time.monotonic() < until:
            if await other.acquire(blocking=False):
                stolen += 1
                await other.release()
            await asyncio.sleep(0.05)
        assert stolen == 0
        assert await lock.owned()
        await lock.release()
        assert await r.exists(lock.key) == 0
        assert get_async_renewer().active() == 0
        await r.aclose()
        await r2.aclose()

    run(body())


def test_acquire_release_cycles_leave_nothing(target: Target, world: str) -> None:
    # A leak per cycle (a key, a renewal, a hold) shows after a few thousand.
    if world == "sync":
        lock = seawall.Lock(target.sync(), "cycled", ttl=1.0)
        for _ in range(3_000):
            lock.acquire()
            lock.release()
        assert get_renewer().active() == 0
    else:

        async def body() -> None:
            r = target.aio()
            lock = seawall.aio.Lock(r, "cycled", ttl=1.0)
            for _ in range(3_000):
                await lock.acquire()
                await lock.release()
            assert get_async_renewer().active() == 0
            await r.aclose()

        run(body())
    assert target.lock_keys() == []


# --- behaviour on one server ---------------------------------------------------------------


def test_fence_strictly_increases_per_name(standalone: Target) -> None:
    r = standalone.sync()
    lock = seawall.Lock(r, "fenced")
    fences = []
    for _ in range(50):
        with lock:
            fences.append(lock.fence)
    assert fences == sorted(set(fences))
    other = seawall.Lock(r, "other-name")
    with other:
        # Per name: its own counter, which starts from the server's clock (docs/fences.md).
        assert int(r.get(f"{other.key}:fence")) == other.fence
        assert int(r.get(f"{lock.key}:fence")) == fences[-1]


def test_waiter_is_woken_by_release_not_by_polling(standalone: Target) -> None:
    r = standalone.sync()
    holder_lock = seawall.Lock(r, "wake", ttl=30.0)
    holder_lock.acquire()
    got: list[float] = []

    def wait() -> None:
        waiter = seawall.Lock(standalone.sync(), "wake", ttl=30.0)
        assert waiter.acquire(timeout=10)
        got.append(time.monotonic())
        waiter.release()

    thread = threading.Thread(target=wait)
    thread.start()
    time.sleep(0.5)  # the waiter is subscribed and waiting; the holder's key has ~30 s left
    released_at = time.monotonic()
    holder_lock.release()
    thread.join(10)
    assert got, "waiter never acquired"
    # A poll loop or an expiry-based re-check would take far longer than this.
    assert got[0] - released_at < 0.2


def test_not_reentrant_for_the_same_thread(standalone: Target) -> None:
    lock = seawall.Lock(standalone.sync(), "self", ttl=5.0)
    with lock, pytest.raises(seawall.LockError, match="not reentrant"):
        lock.acquire()


def test_one_lock_object_shared_by_threads(standalone: Target) -> None:
    r = standalone.sync()
    lock = seawall.Lock(r, "shared-object", ttl=5.0)
    inside = 0
    peak = 0
    mutex = threading.Lock()

    def work() -> None:
        nonlocal inside, peak
        for _ in range(50):
            with lock:
                with mutex:
                    inside += 1
                    peak = max(peak, inside)
                time.sleep(0.0005)
                with mutex:
                    inside -= 1

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert peak == 1
    assert standalone.lock_keys() == []


def test_timeout_and_lock_timeout_error(standalone: Target) -> None:
    r = standalone.sync()
    held = seawall.Lock(r, "busy", ttl=5.0)
    held.acquire()
    waiter = seawall.Lock(r, "busy", ttl=5.0, timeout=0.2)
    started = time.monotonic()
    with pytest.raises(seawall.LockTimeout, match="'busy'"), waiter:
        pass
    assert 0.2 <= time.monotonic() - started < 1.0
    assert waiter.acquire(timeout=0) is False
    held.release()
    assert waiter.acquire(timeout=0) is True
    waiter.release()


def test_extend_resets_the_lease(standalone: Target) -> None:
    r = standalone.sync()
    lock = seawall.Lock(r, "ext", ttl=2.0, renew=False)
    lock.acquire()
    lock.extend(ttl=20.0)
    assert r.pttl(lock.key) > 19_000
    lock.release()


def test_released_key_is_gone_and_others_see_it_free(standalone: Target) -> None:
    r = standalone.sync()
    lock = seawall.Lock(r, "free")
    assert not lock.locked()
    with lock:
        assert lock.locked()
        assert seawall.Lock(r, "free").locked()
        assert not seawall.Lock(r, "free").owned()
    assert not lock.locked()
    assert not lock.owned()


def test_fenced_write_rejects_an_old_fence(standalone: Target) -> None:
    r = standalone.sync()
    assert seawall.fenced_write(r, "acct", "100", fence=5)
    assert not seawall.fenced_write(r, "acct", "90", fence=4)
    assert not seawall.fenced_write(r, "acct", "90", fence=5)
    assert seawall.fenced_read(r, "acct") == (b"100", 5)
    assert seawall.fenced_write(r, "acct", "80", fence=6)
    assert seawall.fenced_read(r, "acct") == (b"80", 6)
    with pytest.raises(ValueError, match="positive int"):
        seawall.fenced_write(r, "acct", "1", fence=0)


def test_works_with_decode_responses(standalone: Target) -> None:
    r = standalone.sync(decode_responses=True)
    lock = seawall.Lock(r, "decoded", ttl=1.0)
    with lock:
        assert lock.owned()
    assert not lock.owned()


def test_async_waiters_woken_in_one_loop(standalone: Target) -> None:
    async def body() -> None:
        r = standalone.aio()
        order: list[int] = []

        async def worker(i: int) -> None:
            async with seawall.aio.Lock(r, "aio-queue", ttl=5.0, timeout=10):
                order.append(i)
                await asyncio.sleep(0.005)

        started = time.monotonic()
        await asyncio.gather(*(worker(i) for i in range(50)))
        assert sorted(order) == list(range(50))
        assert time.monotonic() - started < 5.0
        await r.aclose()

    run(body())


def test_scripts_reload_after_script_flush(standalone: Target) -> None:
    r = standalone.sync()
    lock = seawall.Lock(r, "flushed")
    with lock:
        pass
    r.script_flush()
    with lock:
        assert lock.owned()
