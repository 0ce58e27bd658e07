"""Grants: a release hands the lock to a starving waiter's token outright (lock_release.lua).

The waiter's process hears the grant on its wake-up channel and its listener gives the
waiting head its hold with no try. What must hold: the grant is taken without a round
trip, its lease is never counted longer than the server keeps it, a waiter that gives up
as it is granted leaves the lock free (not held for its ttl), and a waiter frozen while
queued holds a grant no longer than its ttl and, thawed, never believes in a lapsed one.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import threading
import time
from typing import Any

import pytest
import redis
from conftest import SPAWN, Target
from lockworkers import holder
from waiting import wait_until

import seawall
import seawall.aio
from seawall.launcher._supervised import wait_stopped
from seawall.locks import _lease
from seawall.locks._async import lock as async_lock_module
from seawall.locks._async import waker as async_waker_module
from seawall.locks._sync import lock as lock_module
from seawall.locks._sync import waker as waker_module
from seawall.shared._keys import lock_keys

STARVED = _lease.STARVING + 0.03  # a queued waiter is starving after this long


def _waiting_here(lock: Any, name: str, bound: float = 30.0) -> None:
    """Wait until the head waiting here for lock `name` waits with a grant it can take."""
    waker, key = lock._get_waker(), lock_keys(name).key

    def waiting() -> bool:
        queue = waker._queues.get(key)
        return bool(queue) and queue[0].grant is not None

    wait_until(waiting, bound, f"the waiter for {name!r} waits to be granted the lock")


# Alone: the path pinned here is the listener taking the grant, which a waiter whose own
# wait slice ran out first (a starved listener on a loaded machine) would not take.
@pytest.mark.serial
def test_a_starving_waiter_is_granted_the_lock_with_no_try(
    standalone: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = standalone.sync()
    tries: list[float] = []
    plain = lock_module.Lock._attempt

    def counted(lock: Any, *args: Any, **kwargs: Any) -> Any:
        tries.append(time.monotonic())
        return plain(lock, *args, **kwargs)

    monkeypatch.setattr(lock_module.Lock, "_attempt", counted)
    first = seawall.Lock(r, "granted", ttl=10.0)
    assert first.acquire()
    waiter = seawall.Lock(r, "granted", ttl=2.0, renew=False)
    outcome: list[Any] = []

    def wait() -> None:
        outcome.append(waiter.acquire(timeout=20))
        hold = waiter._current(adopt=False)
        assert hold is not None
        # What the waiter counts on of its lease, then what the server keeps of it.
        outcome.append((hold.deadline - time.monotonic(), r.pttl(waiter.key) / 1000))
        outcome.append(r.get(waiter.key).decode() == hold.token)

    thread = threading.Thread(target=wait)
    thread.start()
    try:
        _waiting_here(waiter, "granted")
        time.sleep(STARVED)
        released = time.monotonic()
        first.release()
        thread.join(10)
        assert outcome[0] is True and outcome[2] is True
        assert [t for t in tries if t >= released] == [], "the waiter tried after the grant"
        assert waiter.fence > first.fence
        # Its lease is counted from before the grant: never longer than the server's.
        counted_on, kept = outcome[1]
        assert 1.0 < counted_on <= kept + 0.002
    finally:
        thread.join(10)
    assert r.delete(waiter.key) == 1


# Alone: it steps a waiter through a grant heard late, one round trip at a time.
@pytest.mark.serial
def test_a_grant_heard_after_a_later_try_counts_its_lease_from_before_it(
    standalone: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A grant its listener reads late (a process thawed from a pause: the waiting thread's
    next try came back before the listener read the grant), by when it had lapsed and
    another process held the lock: the waiter must not take it for a hold."""
    r = standalone.sync()
    others = redis.Redis.from_url(standalone.url)  # another waker: as another process
    name = "late-grant"
    first = seawall.Lock(others, name, ttl=30.0)
    assert first.acquire()
    heard, gate = threading.Event(), threading.Event()
    plain_on_grant = waker_module.Waker._on_grant

    def late(waker: Any, message: str) -> bool:
        heard.set()
        gate.wait(10)
        return plain_on_grant(waker, message)

    tries: list[float] = []
    plain_attempt = lock_module.Lock._waiting_attempt

    def noted(lock: Any, *args: Any, **kwargs: Any) -> Any:
        outcome = plain_attempt(lock, *args, **kwargs)
        tries.append(time.monotonic())
        return outcome

    monkeypatch.setattr(waker_module.Waker, "_on_grant", late)
    monkeypatch.setattr(lock_module.Lock, "_waiting_attempt", noted)
    waiter = seawall.Lock(r, name, ttl=0.5)
    outcome: list[bool] = []
    thread = threading.Thread(target=lambda: outcome.append(waiter.acquire(timeout=4)))
    thread.start()
    try:
        _waiting_here(waiter, name)
        time.sleep(STARVED)
        first.release()  # granted to the waiter, whose listener holds the message back
        assert heard.wait(5), "no grant was published"
        second = seawall.Lock(others, name, ttl=30.0)
        assert second.acquire(timeout=5), "the grant did not lapse"
        taken = time.monotonic()
        wait_until(lambda: any(t > taken for t in tries), 5, "the waiter's next try")
        _waiting_here(waiter, name)  # waiting again, ready to take a grant
        gate.set()
        thread.join(10)
        assert outcome == [False], "the waiter took a lapsed grant while another held the lock"
        assert second.owned()
        second.release()
    finally:
        gate.set()
        thread.join(10)


@pytest.mark.serial
def test_an_asyncio_waiter_is_granted_the_lock_with_no_try(
    standalone: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    tries: list[float] = []
    plain = async_lock_module.AsyncLock._attempt

    async def counted(lock: Any, *args: Any, **kwargs: Any) -> Any:
        tries.append(time.monotonic())
        return await plain(lock, *args, **kwargs)

    monkeypatch.setattr(async_lock_module.AsyncLock, "_attempt", counted)

    async def main() -> None:
        r = standalone.aio()
        first = seawall.aio.Lock(r, "granted-aio", ttl=10.0)
        waiter = seawall.aio.Lock(r, "granted-aio", ttl=10.0)
        assert await first.acquire()
        task = asyncio.create_task(waiter.acquire(timeout=20))
        while not (queue := waiter._get_waker()._queues.get(waiter.key)) or not queue[0].grant:
            await asyncio.sleep(0.005)
        await asyncio.sleep(STARVED)
        released = time.monotonic()
        await first.release()
        assert await asyncio.wait_for(task, 10)
        assert [t for t in tries if t >= released] == [], "the waiter tried after the grant"
        assert waiter.fence > first.fence
        await waiter.release()
        assert not await r.exists(waiter.key)
        await r.aclose()

    asyncio.run(main())


def _free_soon(r: Any, name: str) -> float:
    """How long another caller waits for lock `name` (it must not wait out a lease)."""
    started = time.monotonic()
    other = seawall.Lock(r, name, ttl=30.0)
    assert other.acquire(timeout=5), f"lock {name!r} stayed held after its waiter left"
    other.release()
    return time.monotonic() - started


def test_sync_waiters_timing_out_as_they_are_granted_leave_the_lock_free(
    standalone: Target,
) -> None:
    r = standalone.sync()
    rng = random.Random(2811)
    for round_ in range(25):
        name = f"give-up-{round_}"
        first = seawall.Lock(r, name, ttl=30.0)
        assert first.acquire()
        waiter = seawall.Lock(r, name, ttl=30.0)
        wait_for = STARVED + 0.02
        got: list[bool] = []
        thread = threading.Thread(target=_acquire_into, args=(waiter, wait_for, got))
        thread.start()
        # Released around the waiter's deadline: granted before it, as it ends, or after.
        time.sleep(wait_for + rng.uniform(-0.015, 0.015))
        first.release()
        thread.join(10)
        if got[0]:
            waiter.release()
        assert _free_soon(r, name) < 2.0


def _acquire_into(lock: Any, timeout: float, got: list[bool]) -> None:
    got.append(lock.acquire(timeout=timeout))


def test_asyncio_waiters_cancelled_as_they_are_granted_leave_the_lock_free(
    standalone: Target,
) -> None:
    rng = random.Random(2812)

    async def main() -> None:
        r = standalone.aio()
        for round_ in range(25):
            name = f"cancelled-{round_}"
            first = seawall.aio.Lock(r, name, ttl=30.0)
            waiter = seawall.aio.Lock(r, name, ttl=30.0)
            assert await first.acquire()
            task = asyncio.create_task(waiter.acquire(timeout=20))
            await asyncio.sleep(STARVED)
            await first.release()
            # Cancelled at a random moment of the grant's way to the waiter.
            await asyncio.sleep(rng.uniform(0, 0.003))
            task.cancel()
            try:
                if await task:
                    await waiter.release()
            except asyncio.CancelledError:
                pass
            started = time.monotonic()
            other = seawall.aio.Lock(r, name, ttl=30.0)
            assert await other.acquire(timeout=5), f"{name!r} stayed held"
            assert time.monotonic() - started < 2.0
            await other.release()
        await r.aclose()

    asyncio.run(main())


def test_a_waiter_frozen_while_queued_holds_a_grant_no_longer_than_its_ttl(
    standalone: Target,
) -> None:
    r = standalone.sync()
    name, ttl = "frozen-waiter", 1.5
    first = seawall.Lock(r, name, ttl=30.0)
    assert first.acquire()
    ours, theirs = SPAWN.Pipe()
    child = SPAWN.Process(target=holder, args=(standalone.url, False, "sync", name, ttl, theirs))
    child.start()
    pid = child.pid
    assert pid is not None
    try:
        ours.send(("acquire",))
        wait_until(lambda: r.hexists(lock_keys(name).grants, _only(r, name)), 30, "queued")
        time.sleep(STARVED)
        os.kill(pid, signal.SIGSTOP)
        # Stopped before the release: a thread still running for a moment after kill()
        # would hear the grant while its lease is good, and rightly hold the lock.
        assert wait_stopped(pid), "the waiter did not stop"
        first.release()  # granted to the frozen process: it still listens
        started = time.monotonic()
        other = seawall.Lock(r, name, ttl=30.0)
        assert other.acquire(timeout=10)
        waited = time.monotonic() - started
        assert waited <= ttl + 1.0, f"waited {waited:.2f} s for a grant of {ttl} s"
        os.kill(pid, signal.SIGCONT)
        # Thawed, the child must not take its lapsed grant for a hold.
        assert not ours.poll(1.0), "the thawed waiter believes it holds the lock"
        other_fence = other.fence
        other.release()
        assert ours.poll(10)
        state, fence = ours.recv()
        assert state == "held" and fence > other_fence
        ours.send(("finish", "{frozen-waiter}:data", "child"))
        assert ours.recv()[1:3] == (True, "released")
    finally:
        os.kill(pid, signal.SIGCONT)
        ours.send(("stop",))
        child.join(10)
        if child.is_alive():
            child.kill()


def _only(r: Any, name: str) -> str:
    """The one waiting process of lock `name` ("" while there is none)."""
    members = r.zrange(lock_keys(name).waiters, 0, -1)
    return members[0].decode() if len(members) == 1 else ""


@pytest.mark.parametrize("world", ["sync", "async"])
def test_a_waiter_gone_before_its_process_left_the_queue_is_not_granted_the_lock(
    standalone: Target, monkeypatch: pytest.MonkeyPatch, world: str
) -> None:
    # A waiter that gave up leaves its process queued until the process's withdrawal runs
    # (in the background; on a frozen server it may never run). A release meanwhile must
    # not grant the lock to the gone waiter's token for its whole ttl.
    r = standalone.sync()
    name = f"gone-{world}"
    monkeypatch.setattr(waker_module.Waker, "_withdraw_briefly", lambda self, key: None)

    async def nothing(self: Any, key: str) -> None:
        return None

    monkeypatch.setattr(async_waker_module.AsyncWaker, "_withdraw_briefly", nothing)
    if world == "sync":
        first = seawall.Lock(r, name, ttl=30.0)
        assert first.acquire()
        assert not seawall.Lock(r, name, ttl=30.0).acquire(timeout=STARVED)
        _left_queued(r, name)
        first.release()
        assert _free_soon(r, name) < 2.0
        return

    async def wait_then_release() -> None:
        # The release comes while this loop (and its process's listener) still runs.
        client = standalone.aio()
        try:
            first = seawall.aio.Lock(client, name, ttl=30.0)
            assert await first.acquire()
            assert not await seawall.aio.Lock(client, name, ttl=30.0).acquire(timeout=STARVED)
            await asyncio.to_thread(_left_queued, r, name)
            await first.release()
            assert await asyncio.to_thread(_free_soon, r, name) < 2.0
        finally:
            await client.aclose()

    asyncio.run(wait_then_release())


def _left_queued(r: Any, name: str) -> None:
    assert r.zcard(lock_keys(name).waiters) == 1  # still queued, its waiter gone
    time.sleep(0.2)  # the waiter's give-back has run
