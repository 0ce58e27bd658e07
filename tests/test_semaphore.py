"""seawall.Semaphore and seawall.aio.Semaphore against real servers: one server and the 3+3
cluster, sync and asyncio."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from conftest import Target
from forked import FORKSERVER
from semaphoreworkers import cycle_permits, hold_permit
from waiting import wait_until

import seawall
import seawall.aio
from seawall.locks._async.renewer import get_renewer as get_async_renewer
from seawall.locks._sync import semaphore as semaphore_module
from seawall.locks._sync.renewer import get_renewer
from seawall.shared import _scripts
from seawall.shared._keys import WAKE_PREFIX, semaphore_keys
from seawall.shared._sync.scripts import run_script


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def peak_overlap(intervals: list[tuple[int, int]]) -> int:
    """The most intervals open at one instant (an exit at t comes before an entry at t)."""
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    peak = inside = 0
    for _, step in events:
        inside += step
        peak = max(peak, inside)
    return peak


# --- the bound holds across processes ----------------------------------------------------


def test_bound_respected_across_processes(target: Target, world: str) -> None:
    value, processes, cycles = 2, 3, 20
    with FORKSERVER.Pool(processes) as pool:
        # All three begin together (see _start_together): forked from the fork server,
        # they are ready in well under that; one that is late still meets the others in
        # its first hold (cycle_permits), so the permits are shared either way.
        start_at = time.time() + 0.5
        ledgers = pool.starmap(
            cycle_permits,
            [(target.url, target.cluster, world, "bound", value, cycles, start_at)] * processes,
        )
    intervals = [interval for ledger in ledgers for interval in ledger]
    assert len(intervals) == processes * cycles
    # Exactly the bound: never above it, and the permits were really shared.
    assert peak_overlap(intervals) == value
    target.sync().delete("meet:bound")
    assert target.lock_keys() == []


# --- waiters are served in arrival order --------------------------------------------------


def _queued(target: Target, name: str) -> int:
    return int(target.sync().zcard(semaphore_keys(name).waiters))


# Alone: a queued waiter that does not try again within WAITER_LAPSE_MS (1.5 s) counts as
# gone and loses its turn (liveness over order); beside 3 busy workers a waiter of the
# cluster-async run once missed it, and the order came out [1, 0, 2].
@pytest.mark.serial
def test_waiters_served_in_arrival_order(target: Target, world: str) -> None:
    # Each waiter has its own client, hence its own waker: a "process" to the queue.
    waiters, name = 3, "fifo"
    order: list[int] = []
    if world == "sync":
        holder = seawall.Semaphore(target.sync(), name, value=1, ttl=5.0)
        assert holder.acquire()

        def wait(i: int) -> None:
            sem = seawall.Semaphore(target.sync(), name, value=1, ttl=5.0)
            assert sem.acquire(timeout=20)
            order.append(i)
            time.sleep(0.01)
            sem.release()

        threads = []
        for i in range(waiters):
            threads.append(threading.Thread(target=wait, args=(i,)))
            threads[-1].start()
            wait_until(lambda i=i: _queued(target, name) == i + 1, 10, f"{i + 1} queued")
        # A newcomer does not overtake them, though it arrives while the permit is free.
        newcomer = seawall.Semaphore(target.sync(), name, value=1, ttl=5.0)
        holder.release()
        assert newcomer.acquire(blocking=False) is False
        for thread in threads:
            thread.join(20)
    else:

        async def body() -> None:
            clients = [target.aio() for _ in range(waiters + 2)]
            holder = seawall.aio.Semaphore(clients[-1], name, value=1, ttl=5.0)
            assert await holder.acquire()

            async def wait(i: int) -> None:
                sem = seawall.aio.Semaphore(clients[i], name, value=1, ttl=5.0)
                assert await sem.acquire(timeout=20)
                order.append(i)
                await asyncio.sleep(0.01)
                await sem.release()

            tasks = []
            for i in range(waiters):
                tasks.append(asyncio.create_task(wait(i)))
                while _queued(target, name) != i + 1:
                    await asyncio.sleep(0.005)
            newcomer = seawall.aio.Semaphore(clients[-2], name, value=1, ttl=5.0)
            await holder.release()
            assert await newcomer.acquire(blocking=False) is False
            await asyncio.wait_for(asyncio.gather(*tasks), 20)
            for client in clients:
                await client.aclose()

        run(body())
    assert order == list(range(waiters))
    assert target.lock_keys() == []


LAPSE_MS = 100  # seawall.Semaphore passes WAITER_LAPSE_MS; shorter here to keep it quick


def test_newcomer_never_takes_a_permit_a_queued_process_waits_for(standalone: Target) -> None:
    r = standalone.sync()
    keys = semaphore_keys("queue")
    acquire = semaphore_module._ACQUIRE
    release = _scripts.load("seawall.locks", "semaphore_release")

    def attempt(token: str, waiter: str = "") -> list[Any]:
        return run_script(  # type: ignore[no-any-return]
            r,
            acquire,
            (keys.key, keys.fence, keys.waiters, keys.seen),
            (token, 2, 10_000, waiter, LAPSE_MS, 5_000, ""),
        )

    assert attempt("a")[0] == 1
    assert attempt("b")[0] == 1
    assert attempt("w-token", waiter="w")[0] == 0  # w queued: both permits held
    assert run_script(r, release, (*keys.queue, keys.record("a")), ("a", 2, WAKE_PREFIX, 1)) == 1
    assert attempt("barger")[0] == 0  # one permit free, but w came first
    assert attempt("x-token", waiter="x")[0] == 0  # so did w for a queued newcomer
    assert attempt("w-token", waiter="w")[0] == 1
    assert r.zrange(keys.waiters, 0, -1) == [b"x"]
    # A queued process that stops trying is dropped after its lapse: x has not retried.
    time.sleep(LAPSE_MS / 1000 + 0.05)
    assert run_script(r, release, (*keys.queue, keys.record("b")), ("b", 2, WAKE_PREFIX, 1)) == 1
    assert attempt("late")[0] == 1
    assert r.exists(keys.waiters) == 0


# --- only the holder releases ------------------------------------------------------------


def test_release_by_non_holder_raises(target: Target, world: str) -> None:
    if world == "sync":
        r = target.sync()
        stranger = seawall.Semaphore(r, "owner", value=1, ttl=5.0)
        with pytest.raises(seawall.LockNotOwnedError, match="'owner'"):
            stranger.release()
        lapsed = seawall.Semaphore(r, "owner", value=1, ttl=0.2, renew=False)
        assert lapsed.acquire()
        time.sleep(0.3)
        successor = seawall.Semaphore(r, "owner", value=1, ttl=10.0)
        assert successor.acquire(blocking=False)
        with pytest.raises(seawall.LockNotOwnedError, match="'owner'"):
            lapsed.release()
        assert lapsed.acquire(blocking=False) is False
        with pytest.raises(seawall.LockNotOwnedError):
            lapsed.extend(ttl=100)
        assert successor.owned() and successor.holders() == 1
        successor.release()
        assert successor.available() == 1
        return

    async def body() -> None:
        r = target.aio()
        stranger = seawall.aio.Semaphore(r, "owner", value=1, ttl=5.0)
        with pytest.raises(seawall.LockNotOwnedError, match="'owner'"):
            await stranger.release()
        lapsed = seawall.aio.Semaphore(r, "owner", value=1, ttl=0.2, renew=False)
        assert await lapsed.acquire()
        await asyncio.sleep(0.3)
        successor = seawall.aio.Semaphore(r, "owner", value=1, ttl=10.0)
        assert await successor.acquire(blocking=False)
        with pytest.raises(seawall.LockNotOwnedError, match="'owner'"):
            await lapsed.release()
        with pytest.raises(seawall.LockNotOwnedError):
            await lapsed.extend(ttl=100)
        assert await successor.owned() and await successor.holders() == 1
        await successor.release()
        assert await successor.available() == 1
        await r.aclose()

    run(body())


# --- a dead holder's permit comes back; a live one's renewals do not keep it --------------


def test_dead_holder_permit_returns_within_ttl(target: Target, world: str) -> None:
    ttl, name = 0.6, "dead"
    parent_end, child_end = FORKSERVER.Pipe()
    child = FORKSERVER.Process(
        target=hold_permit, args=(target.url, target.cluster, world, name, 2, ttl, child_end)
    )
    child.start()
    try:
        assert parent_end.poll(20), "holder did not acquire"
        _, dead_fence = parent_end.recv()
        # A live holder keeps renewing its own lease meanwhile. Its lease is 3 s, renewed
        # every second: at 1.2 s (renewed every 0.4 s) a loaded parallel run lost it once.
        live = seawall.Semaphore(target.sync(), name, value=2, ttl=5 * ttl)
        assert live.acquire(timeout=5)
        # The taker's client is connected (on Cluster: its slot map read) before the kill,
        # so the time measured is the permit's, not a connection's set-up on a busy machine.
        if world == "sync":
            client = target.sync()
            client.ping()
            taker = seawall.Semaphore(client, name, value=2, ttl=ttl)
            child.kill()
            killed_at = time.monotonic()
            assert taker.acquire(timeout=ttl + 2)
            waited = time.monotonic() - killed_at
            fence = taker.fence
            taker.release()
        else:

            async def take() -> tuple[float, int]:
                r = target.aio()
                await r.ping()
                taker = seawall.aio.Semaphore(r, name, value=2, ttl=ttl)
                child.kill()
                killed_at = time.monotonic()
                assert await taker.acquire(timeout=ttl + 2)
                waited = time.monotonic() - killed_at
                await taker.release()
                await r.aclose()
                return waited, taker.fence

            waited, fence = run(take())
        assert live.owned()
        live.release()
    finally:
        child.kill()
        child.join(5)
    assert waited <= ttl + 0.5
    assert fence > dead_fence


# --- renewal keeps a short permit; cycles leave only the fence counter --------------------


# Leases of a fraction of a second, renewed at a third of that: a latency bound, measured
# alone after the parallel part (`scripts/dev.py test`), as the other serial tests are.
@pytest.mark.serial
def test_renewal_keeps_a_short_permit_and_cycles_leave_nothing(target: Target, world: str) -> None:
    ttl, name = 0.8, "renewed"
    if world == "sync":
        r = target.sync()
        sem = seawall.Semaphore(r, name, value=1, ttl=ttl)
        other = seawall.Semaphore(target.sync(), name, value=1, ttl=ttl)
        assert sem.acquire()
        stolen = 0
        until = time.monotonic() + 1.5
        while time.monotonic() < until:
            if other.acquire(blocking=False):
                stolen += 1
                other.release()
            time.sleep(0.05)
        assert stolen == 0
        assert sem.owned()
        sem.release()
        for _ in range(200):
            sem.acquire()
            sem.release()
        assert get_renewer().active() == 0
    else:

        async def body() -> None:
            r, r2 = target.aio(), target.aio()
            sem = seawall.aio.Semaphore(r, name, value=1, ttl=ttl)
            other = seawall.aio.Semaphore(r2, name, value=1, ttl=ttl)
            assert await sem.acquire()
            stolen = 0
            until = time.monotonic() + 1.5
            while time.monotonic() < until:
                if await other.acquire(blocking=False):
                    stolen += 1
                    await other.release()
                await asyncio.sleep(0.05)
            assert stolen == 0
            assert await sem.owned()
            await sem.release()
            for _ in range(200):
                await sem.acquire()
                await sem.release()
            assert get_async_renewer().active() == 0
            await r.aclose()
            await r2.aclose()

        run(body())
    assert target.lock_keys() == []
    keys = semaphore_keys(name)
    # Left: the counter and one record per release, all expiring (see lock_keys).
    left = target.keys()
    assert keys.fence in left
    assert all(key == keys.fence or key.startswith(f"{keys.released}:") for key in left), left


# --- behaviour on one server --------------------------------------------------------------


def test_one_owner_holds_several_permits_through_one_object(standalone: Target) -> None:
    # As with threading.Semaphore, one thread may take several permits; each release gives
    # back its newest, and the fence is that of its newest permit still held.
    sem = seawall.Semaphore(standalone.sync(), "one", value=3)
    with sem:
        first = sem.fence
        with sem:
            assert sem.fence > first
            assert sem.holders() == 2
        assert sem.fence == first
        assert sem.holders() == 1
    assert sem.holders() == 0
    with pytest.raises(seawall.LockNotOwnedError, match="'one'"):
        sem.release()


def test_timeout_and_lock_timeout_error(standalone: Target) -> None:
    r = standalone.sync()
    held = [seawall.Semaphore(r, "busy", value=2, ttl=5.0) for _ in range(2)]
    for sem in held:
        assert sem.acquire()
    waiter = seawall.Semaphore(r, "busy", value=2, ttl=5.0, timeout=0.2)
    started = time.monotonic()
    with pytest.raises(seawall.LockTimeout, match="'busy'"), waiter:
        pass
    assert 0.2 <= time.monotonic() - started < 1.0
    held[0].release()
    assert waiter.acquire(timeout=0)
    assert waiter.fence > held[1].fence
    waiter.release()
    held[1].release()


def test_waiter_is_woken_by_release(standalone: Target) -> None:
    r = standalone.sync()
    holder = seawall.Semaphore(r, "wake", value=1, ttl=30.0)
    holder.acquire()
    got: list[float] = []

    def wait() -> None:
        sem = seawall.Semaphore(standalone.sync(), "wake", value=1, ttl=30.0)
        assert sem.acquire(timeout=10)
        got.append(time.monotonic())
        sem.release()

    thread = threading.Thread(target=wait)
    thread.start()
    wait_until(lambda: _queued(standalone, "wake") == 1, 10, "one queued")
    released_at = time.monotonic()
    holder.release()
    thread.join(10)
    assert got, "waiter never acquired"
    # Its own re-check comes only every 0.4 s: this fast, it was woken.
    assert got[0] - released_at < 0.2


def test_threads_with_one_object_each(standalone: Target) -> None:
    r = standalone.sync()
    inside = peak = 0
    mutex = threading.Lock()

    def work() -> None:
        nonlocal inside, peak
        sem = seawall.Semaphore(r, "threads", value=3, ttl=5.0)
        for _ in range(30):
            with sem:
                with mutex:
                    inside += 1
                    peak = max(peak, inside)
                time.sleep(0.001)
                with mutex:
                    inside -= 1

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert peak == 3
    assert standalone.lock_keys() == []


def test_extend_sets_only_this_holders_lease(standalone: Target) -> None:
    r = standalone.sync()
    a = seawall.Semaphore(r, "ext", value=2, ttl=2.0, renew=False)
    b = seawall.Semaphore(r, "ext", value=2, ttl=2.0, renew=False)
    a.acquire()
    b.acquire()
    a.extend(ttl=20.0)
    scores = dict(r.zrange(a.key, 0, -1, withscores=True))
    assert sorted(scores.values())[1] - sorted(scores.values())[0] > 17_000
    assert r.pttl(a.key) > 19_000  # the key lives as long as its longest lease
    a.release()
    b.release()
    assert r.exists(a.key) == 0
