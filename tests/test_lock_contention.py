"""Contention: the queue of waiting processes, hand-offs to starving waiters, dead waiters."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from conftest import SPAWN, Target
from lockworkers import contend, counter_key, wait_for_lock

import seawall
from seawall.locks import _lease
from seawall.locks._sync import lock as lock_module
from seawall.locks._sync import waker as waker_module
from seawall.shared._keys import WAKE_PREFIX, lock_keys
from seawall.shared._sync.scripts import run_script

ACQUIRE = lock_module._ACQUIRE
RELEASE = lock_module._RELEASE
CONTENTION = (20, 100, 5)  # starving, hand-off, throttle (ms), as seawall.Lock passes them


def _acquire(
    r: object, name: str, token: str, waiter: str = "", grantable: bool = False
) -> list[object]:
    k = lock_keys(name)
    return run_script(  # type: ignore[no-any-return]
        r,
        ACQUIRE,
        (k.key, k.fence, k.waiters, k.throttle, k.queued, k.grants),
        (token, 10_000, waiter, 5_000, "", "1" if waiter else "", "1" if grantable else ""),
    )


def _release(
    r: object, name: str, token: str, starving_ms: int = CONTENTION[0], leaving: str = ""
) -> int:
    k = lock_keys(name)
    return int(
        run_script(
            r,
            RELEASE,
            (k.key, k.waiters, k.throttle, k.record(token), k.queued, k.grants, k.fence),
            (token, WAKE_PREFIX, starving_ms, *CONTENTION[1:], "", leaving),
        )
    )


def _message(pubsub: Any) -> str | None:
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        message = pubsub.get_message(timeout=0.2)
        if message is not None and message["type"] == "message":
            return message["data"].decode()  # type: ignore[no-any-return]
    return None


def test_starving_waiter_whose_process_listens_is_granted_the_lock(standalone: Target) -> None:
    r = standalone.sync()
    keys = lock_keys("granted")
    pubsub = r.pubsub()
    pubsub.subscribe(WAKE_PREFIX + "w1")
    try:
        held = _acquire(r, "granted", "holder")
        assert _acquire(r, "granted", "w1-token", waiter="w1", grantable=True)[0] == 0
        assert r.hget(keys.grants, "w1") == b"w1-token 10000"
        time.sleep(0.03)  # w1 is now starving (> 20 ms)
        assert _release(r, "granted", "holder") == 1
        # Held by w1's token for w1's ttl, numbered after the holder's hold, and w1 told so.
        assert r.get(keys.key) == b"w1-token"
        assert 9_000 < r.pttl(keys.key) <= 10_000
        fence = int(r.get(keys.fence))
        assert fence == int(held[1]) + 1  # type: ignore[call-overload]
        assert _message(pubsub) == f"={fence}:w1-token:{keys.key}"
        assert not r.exists(keys.grants) and not r.zcard(keys.waiters)
        # A try by w1 that did not hear the message finds its own token: held, same fence.
        taken = _acquire(r, "granted", "w1-token", waiter="w1", grantable=True)
        assert taken[:2] == [1, fence] and 9_000 < int(taken[2]) <= 10_000  # type: ignore[call-overload]
        assert _acquire(r, "granted", "barger")[0] == 0
    finally:
        pubsub.close()


def test_a_waiter_whose_process_is_gone_is_not_granted_the_lock(standalone: Target) -> None:
    r = standalone.sync()
    keys = lock_keys("unheard")
    pubsub = r.pubsub()
    pubsub.subscribe(WAKE_PREFIX + "w2")  # w1's process is gone: nobody listens for it
    # A tool that listens to every channel (a monitor, a debugging session) would hear a
    # grant meant for w1: it must not count as w1's process.
    watcher = r.pubsub()
    watcher.psubscribe("seawall:*")
    try:
        assert _acquire(r, "unheard", "holder")[0] == 1
        assert _acquire(r, "unheard", "w1-token", waiter="w1", grantable=True)[0] == 0
        time.sleep(0.002)
        assert _acquire(r, "unheard", "w2-token", waiter="w2", grantable=True)[0] == 0
        time.sleep(0.03)
        assert _release(r, "unheard", "holder") == 1
        assert not r.exists(keys.key)  # free at once, not reserved for the dead process
        assert _message(pubsub) == keys.key  # w2 woken to try
        assert _acquire(r, "unheard", "w2-token", waiter="w2", grantable=True)[0] == 1
    finally:
        pubsub.close()
        watcher.close()


def test_a_grant_taken_by_a_try_after_its_fence_counter_was_lost_is_numbered_anew(
    standalone: Target,
) -> None:
    r = standalone.sync()
    keys = lock_keys("counterless")
    pubsub = r.pubsub()
    pubsub.subscribe(WAKE_PREFIX + "w1")
    try:
        assert _acquire(r, "counterless", "holder")[0] == 1
        assert _acquire(r, "counterless", "w1-token", waiter="w1", grantable=True)[0] == 0
        time.sleep(0.03)
        assert _release(r, "counterless", "holder") == 1
        granted = int(r.get(keys.fence))
        r.delete(keys.fence)  # evicted, or FLUSHALL'd on a replica promoted since
        # The waiter's try finds its own token: held, with a fence from the clock (above
        # every fence the lost counter issued), never an answer without one.
        taken = _acquire(r, "counterless", "w1-token", waiter="w1", grantable=True)
        assert taken[0] == 1 and int(taken[1]) > granted  # type: ignore[call-overload]
        assert int(taken[1]) == int(r.get(keys.fence))  # type: ignore[call-overload]
    finally:
        pubsub.close()


def test_a_waiter_leaving_drops_its_registration_or_gives_back_its_grant(
    standalone: Target,
) -> None:
    r = standalone.sync()
    keys = lock_keys("leaving")
    assert _acquire(r, "leaving", "holder")[0] == 1
    assert _acquire(r, "leaving", "w1-token", waiter="w1", grantable=True)[0] == 0
    # Leaving before any grant: the registration goes, so a release cannot grant to it.
    assert _release(r, "leaving", "w1-token", leaving="w1") == 0
    assert not r.hexists(keys.grants, "w1")
    # A registration that names another token (the process's next head) stays.
    assert _acquire(r, "leaving", "w1-next", waiter="w1", grantable=True)[0] == 0
    assert _release(r, "leaving", "w1-token", leaving="w1") == 0
    assert r.hget(keys.grants, "w1") == b"w1-next 10000"
    # Leaving after a grant: the release gives the lock back.
    pubsub = r.pubsub()
    pubsub.subscribe(WAKE_PREFIX + "w1")
    try:
        time.sleep(0.03)
        assert _release(r, "leaving", "holder") == 1
        assert r.get(keys.key) == b"w1-next"
        assert _release(r, "leaving", "w1-next", leaving="w1") == 1
        assert not r.exists(keys.key)
    finally:
        pubsub.close()


def test_starving_waiter_gets_a_reservation_only_it_can_take(standalone: Target) -> None:
    r = standalone.sync()
    keys = lock_keys("handoff")
    assert _acquire(r, "handoff", "holder")[0] == 1
    assert _acquire(r, "handoff", "w1-token", waiter="w1")[0] == 0  # w1 queued
    time.sleep(0.03)  # w1 is now starving (> 20 ms)
    assert _release(r, "handoff", "holder") == 1
    assert r.get(keys.key) == b"handoff:w1"
    assert 0 < r.pttl(keys.key) <= 100
    assert _acquire(r, "handoff", "barger")[0] == 0  # nobody else may take it
    assert _acquire(r, "handoff", "other-token", waiter="w2")[0] == 0
    taken = _acquire(r, "handoff", "w1-token", waiter="w1")
    assert taken[0] == 1 and r.get(keys.key) == b"w1-token"
    assert r.zrange(keys.waiters, 0, -1) == [b"w2"]  # w1 left the queue, w2 waits


def test_a_reservation_for_a_dead_waiter_expires(standalone: Target) -> None:
    r = standalone.sync()
    assert _acquire(r, "gone", "holder")[0] == 1
    assert _acquire(r, "gone", "t", waiter="dead")[0] == 0
    time.sleep(0.03)
    _release(r, "gone", "holder")
    assert r.get(lock_keys("gone").key) == b"handoff:dead"
    time.sleep(0.12)
    assert _acquire(r, "gone", "survivor")[0] == 1


def test_fresh_waiter_is_woken_but_the_lock_is_left_free(standalone: Target) -> None:
    r = standalone.sync()
    assert _acquire(r, "plain", "holder")[0] == 1
    assert _acquire(r, "plain", "t", waiter="w1")[0] == 0
    # w1 has not waited long enough to starve: no reservation. (The threshold is raised
    # here: a loaded machine can spend seawall's 20 ms between two round trips.)
    assert _release(r, "plain", "holder", starving_ms=10_000) == 1
    assert r.exists(lock_keys("plain").key) == 0
    assert r.get(lock_keys("plain").throttle) == b"w1"


def test_a_wake_up_pending_before_a_try_is_reported_by_rearm(standalone: Target) -> None:
    r = standalone.sync()
    waker = waker_module.get_waker(r)
    key = lock_keys("late").key
    with waker.turn(key) as turn:
        turn.listen(5.0)
        assert turn.waiter_id == waker.id
        assert turn.rearm() is False
        assert turn.wait_signal(0.01) is False  # the wait runs out, then the wake-up comes
        r.publish(WAKE_PREFIX + waker.id, key)
        assert turn.wait_signal(5.0) is True  # (it does not consume the wake-up)
        assert turn.rearm() is True
        assert turn.rearm() is False


def test_a_wake_up_landing_as_a_wait_runs_out_still_counts(
    standalone: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lost wake-up of the tight contended loop, made deterministic.

    A release wakes the waiting process, then wakes it no more for WAKE_THROTTLE; the woken
    process must look again by itself after that. Here the wake-up lands just after the
    waiter's wait ran out (before its next try): that try fails (another process barged
    in), and the release that follows, inside the throttle, wakes nobody. The waiter must
    still look again within moments, not sleep its whole 2 s slice.
    """
    r = standalone.sync()
    name = "late-wake"
    keys = lock_keys(name)
    assert _acquire(r, name, "X")[0] == 1
    window, go = threading.Event(), threading.Event()
    plain_wait = waker_module.Turn.wait_or_try
    plain_attempt = lock_module.Lock._attempt
    state = {"waits": 0, "released": False}

    def wait_or_try(turn: Any, timeout: float, *tries: Any) -> tuple[bool, Any]:
        state["waits"] += 1
        if state["waits"] > 1:
            return plain_wait(turn, timeout, *tries)
        assert plain_wait(turn, 0.05, *tries) == (False, None)  # the first wait runs out ...
        window.set()  # ... and the wake-up lands before the next try (none is left for
        assert go.wait(10)  # the listener to make: it only wakes this waiter)
        return False, None

    def attempt(lock: Any, *args: Any, **kwargs: Any) -> Any:
        outcome = plain_attempt(lock, *args, **kwargs)
        if go.is_set() and outcome is not None and not state["released"]:
            # The barger's release, inside the throttle: it wakes nobody.
            state["released"] = True
            r.delete(keys.key)
        return outcome

    monkeypatch.setattr(waker_module.Turn, "wait_or_try", wait_or_try)
    monkeypatch.setattr(lock_module.Lock, "_attempt", attempt)
    lock = seawall.Lock(r, name, ttl=10.0)
    done: list[float] = []
    waiter = threading.Thread(
        target=lambda: done.append(time.monotonic()) if lock.acquire(timeout=10) else None
    )
    waiter.start()
    try:
        assert window.wait(10)
        waker_id = waker_module.get_waker(r).id
        # X's release (as lock_release.lua does for a head that is not starving), then
        # another process takes the lock at once: one transaction, so the woken try fails.
        with r.pipeline(transaction=True) as both:
            both.delete(keys.key)
            both.set(keys.throttle, waker_id, px=CONTENTION[2])
            both.publish(WAKE_PREFIX + waker_id, keys.key)
            both.set(keys.key, "Y", px=10_000)
            both.execute()
        time.sleep(0.3)  # the wake-up reaches the waiter's process
        started = time.monotonic()
        go.set()
        waiter.join(10)
    finally:
        go.set()
        waiter.join(10)
    assert done, "the waiter never got the lock"
    assert state["released"]
    assert done[0] - started < 1.0, f"the waiter slept {done[0] - started:.2f} s"
    lock.release()


def test_killed_queued_waiter_does_not_stall_the_others(standalone: Target) -> None:
    r = standalone.sync()
    holder = seawall.Lock(r, "dead-waiter", ttl=10.0)
    holder.acquire()
    ready = SPAWN.Event()
    child = SPAWN.Process(target=wait_for_lock, args=(standalone.url, "dead-waiter", ready))
    child.start()
    try:
        assert ready.wait(20)
        deadline = time.monotonic() + 10
        while not r.zcard(lock_keys("dead-waiter").waiters) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert r.zcard(lock_keys("dead-waiter").waiters) == 1, "the child never queued"
        child.kill()
        child.join(5)
        time.sleep(0.05)  # the dead process is now the starving head of the queue
        holder.release()  # ... so the lock is reserved for it
        started = time.monotonic()
        survivor = seawall.Lock(r, "dead-waiter", ttl=10.0)
        assert survivor.acquire(timeout=5)
        waited = time.monotonic() - started
        survivor.release()
    finally:
        child.kill()
        child.join(5)
    assert waited <= _lease.HANDOFF + 0.2


# A timing bound (a wait, a takeover, a share of turns) that failed beside the parallel
# workers on 2 cores: measured alone after the parallel part (`scripts/dev.py test`).
@pytest.mark.serial
def test_waits_stay_bounded_in_a_tight_contended_loop(standalone: Target) -> None:
    processes, seconds = 4, 3.0
    with SPAWN.Pool(processes) as pool:
        # The processes start at once (spawned interpreters come up seconds apart on a
        # busy machine): the window is common to all four.
        start_at = time.time() + 3.0
        args = [(standalone.url, "tight", seconds, start_at)] * processes
        waits = pool.starmap(contend, args)
    total = sum(len(w) for w in waits)
    assert int(standalone.sync().get(counter_key("tight"))) == total
    worst = max(max(w) for w in waits)
    # A releaser that re-takes its lock at once would starve the others for as long as it
    # likes (redis-py: waits of 0.3-2 s here); the hand-off to a starving waiter bounds it.
    assert worst < 0.2, f"a waiter waited {worst * 1000:.0f} ms"
    # Every process has its turns. How many depends on the CPU each of 4 busy processes
    # gets from 2 cores beside the server (a fresh-clone run saw 0.059 / 0.30 / 0.34 /
    # 0.31, with every wait under 0.2 s): the bound rules out a process shut out, while
    # long waits, the starvation itself, are bounded above.
    shares = [len(w) / total for w in waits]
    assert min(shares) > 0.02, shares
