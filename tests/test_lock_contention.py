"""Contention: the queue of waiting processes, hand-offs to starving waiters, dead waiters."""

from __future__ import annotations

import time

import pytest
from conftest import SPAWN, Target
from lockworkers import contend, counter_key, wait_for_lock

import seawall
from seawall import _lease, _scripts
from seawall._keys import WAKE_PREFIX, lock_keys
from seawall._sync.scripts import run_script

ACQUIRE = _scripts.load("lock_acquire")
RELEASE = _scripts.load("lock_release")
CONTENTION = (20, 100, 5)  # starving, hand-off, throttle (ms), as seawall.Lock passes them


def _acquire(r: object, name: str, token: str, waiter: str = "") -> list[object]:
    k = lock_keys(name)
    return run_script(  # type: ignore[no-any-return]
        r,
        ACQUIRE,
        (k.key, k.fence, k.waiters, k.throttle),
        (token, 10_000, waiter, 5_000, "", "1" if waiter else ""),
    )


def _release(r: object, name: str, token: str, starving_ms: int = CONTENTION[0]) -> int:
    k = lock_keys(name)
    return int(
        run_script(
            r,
            RELEASE,
            (k.key, k.waiters, k.throttle, k.released),
            (token, WAKE_PREFIX, starving_ms, *CONTENTION[1:]),
        )
    )


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
@pytest.mark.xfail(
    strict=False,
    reason="known bug, issue 10: now and then a wake-up is lost in this tight 4-process "
    "loop and one waiter waits the 2 s fallback slice (2 of 7 quiet fresh-clone runs on "
    "2026-11-24; 10 of 10 passes alone); not yet found in the waker",
)
def test_waits_stay_bounded_in_a_tight_contended_loop(standalone: Target) -> None:
    processes, seconds = 4, 3.0
    with SPAWN.Pool(processes) as pool:
        waits = pool.starmap(contend, [(standalone.url, "tight", seconds)] * processes)
    total = sum(len(w) for w in waits)
    assert int(standalone.sync().get(counter_key("tight"))) == total
    worst = max(max(w) for w in waits)
    # A releaser that re-takes its lock at once would starve the others for as long as it
    # likes (redis-py: waits of 0.3-2 s here); the hand-off to a starving waiter bounds it.
    assert worst < 0.2, f"a waiter waited {worst * 1000:.0f} ms"
    shares = [len(w) / total for w in waits]
    assert min(shares) > 0.1, shares
