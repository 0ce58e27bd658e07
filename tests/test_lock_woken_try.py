"""The try a wake-up calls for, made by the waker's listener for the waiting head.

A release wakes a waiting process by pub/sub; that process's listener sends the head's
next try at once and wakes the head with the answer (seawall.locks._sync.waker). These
tests pin what that must keep: the try is the head's own (its token, its hold), an error
of that try is the head's error, a head whose wait ran out while its try was in flight
gets that try's answer, and a head interrupted meanwhile leaves nothing held.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
import redis
from conftest import Target
from waiting import wait_until

import seawall
import seawall.aio
from seawall.locks._async import lock as async_lock_module
from seawall.locks._sync import lock as lock_module
from seawall.shared._keys import lock_keys


@pytest.fixture(autouse=True)
def _no_grants(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests pin the woken try: every hand-over on Cluster and with `replicas=`, and
    to a waiter that has not waited long elsewhere. A starving waiter is granted the lock
    outright where grants can be made (tests/test_lock_grants.py), and on a loaded machine
    these tests may take that long to set the scene: their locks are made as on Cluster."""
    monkeypatch.setattr(lock_module, "is_cluster", lambda client: True)
    monkeypatch.setattr(async_lock_module, "is_cluster", lambda client: True)


def _queued(r: Any, name: str, bound: float = 5.0) -> None:
    """Wait until a process is queued for lock `name` (its waiter has tried once)."""
    waiters = lock_keys(name).waiters
    stop = time.monotonic() + bound
    while not r.zcard(waiters):
        assert time.monotonic() < stop, f"nobody queued for {name!r}"
        time.sleep(0.005)


def _handed_to_the_listener(lock: Any, name: str, bound: float = 30.0) -> None:
    """Wait until the head waiting here for lock `name` has handed its next try to the
    waker's listener (it is in its wait). Queued is not enough: a release between its
    queueing try and its wait wakes it before it waits, and it then tries by itself
    (right, but not the path these tests pin; a fresh-clone run saw it)."""
    waker, key = lock._get_waker(), lock_keys(name).key

    def handed() -> bool:
        queue = waker._queues.get(key)
        return bool(queue) and queue[0].attempt is not None

    wait_until(handed, bound, f"the waiter for {name!r} hands its try to the listener")


def _waiting_thread(lock: Any, timeout: float) -> tuple[threading.Thread, list[Any]]:
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(lock.acquire(timeout=timeout))
        except Exception as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


# Alone: beside 3 busy workers the waiter's own wait slice once ran out before the
# release's wake-up reached the listener, so the waiter tried first (correct, but not the
# path this test pins).
@pytest.mark.serial
def test_a_hand_over_is_tried_by_the_listener_for_the_waiter(
    standalone: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = standalone.sync()
    tried_on: list[str] = []
    plain = lock_module.Lock._queued_attempt

    def recorded(lock: Any, *args: Any) -> Any:
        tried_on.append(threading.current_thread().name)
        return plain(lock, *args)

    monkeypatch.setattr(lock_module.Lock, "_queued_attempt", recorded)
    holder, waiter = seawall.Lock(r, "woken", ttl=10), seawall.Lock(r, "woken", ttl=10)
    holder.acquire()
    thread, outcome = _waiting_thread(waiter, 10)
    _queued(r, "woken")
    _handed_to_the_listener(waiter, "woken")
    holder.release()
    thread.join(5)
    assert outcome == [True]
    assert tried_on == ["seawall-waker"], "the woken try was not the listener's"
    assert r.get(lock_keys("woken").key) is not None
    waiter.release()  # the finished thread's hold passes on, as a threading.Lock's does
    assert r.get(lock_keys("woken").key) is None


def test_the_hold_a_listener_took_belongs_to_the_waiting_thread(standalone: Target) -> None:
    r = standalone.sync()
    holder, waiter = seawall.Lock(r, "owner", ttl=10), seawall.Lock(r, "owner", ttl=10)
    holder.acquire()
    results: list[Any] = []

    def run() -> None:
        assert waiter.acquire(timeout=10)
        results.append((waiter.owned(), waiter.fence))
        waiter.release()
        results.append(waiter.owned())

    thread = threading.Thread(target=run)
    thread.start()
    _queued(r, "owner")
    first_fence = holder.fence
    holder.release()
    thread.join(5)
    assert results[0][0] is True and results[0][1] > first_fence
    assert results[1] is False
    assert r.get(lock_keys("owner").key) is None


def test_an_error_of_the_listeners_try_is_the_waiters(
    standalone: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = standalone.sync()

    def failing(lock: Any, *args: Any) -> Any:
        raise redis.ConnectionError("connection lost in the woken try")

    monkeypatch.setattr(lock_module.Lock, "_queued_attempt", failing)
    holder, waiter = seawall.Lock(r, "woken-error", ttl=10), seawall.Lock(r, "woken-error")
    holder.acquire()
    thread, outcome = _waiting_thread(waiter, 10)
    _queued(r, "woken-error")
    _handed_to_the_listener(waiter, "woken-error")
    holder.release()
    thread.join(5)
    assert len(outcome) == 1 and isinstance(outcome[0], redis.ConnectionError)
    assert "woken try" in str(outcome[0])


def test_a_wait_that_runs_out_during_the_try_gets_its_answer(
    standalone: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The try was sent before the deadline: its grant is the acquire's, not a lock left
    held by nobody."""
    r = standalone.sync()
    plain = lock_module.Lock._queued_attempt

    def slow(lock: Any, *args: Any) -> Any:
        time.sleep(0.6)  # the waiter's timeout (0.5 s from its start) passes meanwhile
        return plain(lock, *args)

    monkeypatch.setattr(lock_module.Lock, "_queued_attempt", slow)
    holder, waiter = seawall.Lock(r, "late", ttl=10), seawall.Lock(r, "late", ttl=10)
    holder.acquire()
    held: list[Any] = []

    def run() -> None:
        held.append(waiter.acquire(timeout=0.5))
        held.append(waiter.owned())
        if held[0]:
            waiter.release()

    thread = threading.Thread(target=run)
    thread.start()
    _queued(r, "late")
    _handed_to_the_listener(waiter, "late")
    holder.release()
    thread.join(5)
    assert held == [True, True]
    assert r.get(lock_keys("late").key) is None


def test_a_cancelled_waiter_leaves_nothing_held(
    standalone: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cancelled while the listener's try for it is in flight, then granted: the grant
    is given back, so the next contender gets the lock at once, not after the ttl."""
    started, go, finished = asyncio.Event(), asyncio.Event(), asyncio.Event()
    plain = async_lock_module.AsyncLock._queued_attempt
    answers: list[Any] = []

    async def held_up(lock: Any, *args: Any) -> Any:
        started.set()
        await go.wait()
        answers.append(await plain(lock, *args))
        finished.set()
        return answers[-1]

    monkeypatch.setattr(async_lock_module.AsyncLock, "_queued_attempt", held_up)

    async def main() -> None:
        r = standalone.aio()
        holder = seawall.aio.Lock(r, "cancelled-woken", ttl=30)
        waiter = seawall.aio.Lock(r, "cancelled-woken", ttl=30)
        await holder.acquire()
        task = asyncio.create_task(waiter.acquire(timeout=20))
        waiters = lock_keys("cancelled-woken").waiters
        while not await r.zcard(waiters):
            await asyncio.sleep(0.005)
        waker, key = waiter._get_waker(), lock_keys("cancelled-woken").key
        stop = time.monotonic() + 30
        while not (waker._queues.get(key) and waker._queues[key][0].attempt is not None):
            assert time.monotonic() < stop, "the waiter never handed its try to the listener"
            await asyncio.sleep(0.005)
        await holder.release()
        await asyncio.wait_for(started.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        go.set()  # the try goes on, and is granted: the lock is free
        await asyncio.wait_for(finished.wait(), 5)
        assert answers == [None], "the listener's try was not granted"
        key = lock_keys("cancelled-woken").key
        stop = time.monotonic() + 3.0
        while await r.get(key) is not None:  # given back in the background
            assert time.monotonic() < stop, "the abandoned grant was never given back"
            await asyncio.sleep(0.01)
        third = seawall.aio.Lock(r, "cancelled-woken", ttl=30)
        begun = time.monotonic()
        assert await third.acquire(timeout=5), "the abandoned grant was never given back"
        assert time.monotonic() - begun < 3.0
        await third.release()
        await r.aclose()

    asyncio.run(main())


def test_a_wake_up_while_the_listeners_try_is_in_flight_does_not_spin_the_loop(
    standalone: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a reconnect the listener wakes every head, then may take a head's try from a
    wake-up message before that head ran: the head then waits for the try's end with its
    signal already set. That wait must wait (it spun, never yielding, so the listener on
    the same loop never ended the try: the loop stuck at 100% CPU)."""
    plain = async_lock_module.AsyncLock._queued_attempt

    async def slow(lock: Any, *args: Any) -> Any:
        await asyncio.sleep(0.3)
        return await plain(lock, *args)

    monkeypatch.setattr(async_lock_module.AsyncLock, "_queued_attempt", slow)
    outcome: list[Any] = []

    async def main() -> None:
        r = standalone.aio()
        holder = seawall.aio.Lock(r, "spin", ttl=10)
        waiter = seawall.aio.Lock(r, "spin", ttl=10)
        assert await holder.acquire()
        task = asyncio.create_task(waiter.acquire(timeout=10))
        waker, key = waiter._get_waker(), waiter.key
        while not (waker._queues.get(key) and waker._queues[key][0].attempt is not None):
            await asyncio.sleep(0.005)
        # No await between these: the head has not run since its wait began.
        waker._wake_all()  # what a reconnect does
        taken = waker._take_attempt(key)  # what the next wake-up message does
        assert taken is not None
        trying = asyncio.create_task(waker._try_for(*taken))
        await holder.release()
        outcome.append(await asyncio.wait_for(task, 5))
        await trying
        await waiter.release()
        await r.aclose()

    # In a thread of its own: a spinning loop never yields to a timeout of its own.
    thread = threading.Thread(target=lambda: asyncio.run(main()), daemon=True)
    thread.start()
    thread.join(20)
    assert not thread.is_alive(), "the event loop spun waiting for the listener's try"
    assert outcome == [True]
