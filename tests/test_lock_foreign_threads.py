"""Threads that the threading module did not start (made by C extensions, or by
`_thread.start_new_thread`) own their holds like any other thread: what such a thread
holds when it ends passes on as a finished thread's holds do, and a new such thread that
the system gives the same thread id is a new owner, not the dead one."""

from __future__ import annotations

import _thread
import itertools
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

import pytest
import redis

import seawall

_names = itertools.count()


def in_foreign_thread(call: Callable[[], Any]) -> tuple[int, Any]:
    """Run `call` in a thread started by `_thread` (threading knows it only as a dummy
    thread) and return (its thread id, what `call` returned or raised) once the thread
    has ended: its thread state, thread-locals included, is gone."""
    ended = threading.Event()
    box: dict[str, Any] = {}
    last_local = threading.local()

    class Mark:
        pass

    def body() -> None:
        box["ident"] = threading.get_ident()
        try:
            box["outcome"] = call()
        except Exception as exc:
            box["outcome"] = exc
        # Freed with the thread's locals, after those seawall made during `call`.
        last_local.mark = Mark()
        weakref.finalize(last_local.mark, ended.set)

    _thread.start_new_thread(body, ())
    assert ended.wait(10), "the foreign thread did not end"
    time.sleep(0.02)  # the rest of its thread state is cleared just after
    return box["ident"], box["outcome"]


def build(kind: str, client: redis.Redis) -> tuple[Any, Any]:
    """A lock of `kind`, and another object for the same lock (an outsider)."""
    name = f"foreign-{kind}-{next(_names)}"
    if kind == "lock":
        return seawall.Lock(client, name, ttl=5.0), seawall.Lock(client, name, ttl=5.0)
    if kind == "rlock":
        return seawall.RLock(client, name, ttl=5.0), seawall.RLock(client, name, ttl=5.0)
    return (
        seawall.Semaphore(client, name, value=1, ttl=5.0),
        seawall.Semaphore(client, name, value=1, ttl=5.0),
    )


def assert_free(outsider: Any) -> None:
    assert outsider.acquire(blocking=False), "the lock is still held"
    outsider.release()


@pytest.mark.parametrize("kind", ["lock", "rlock", "semaphore"])
def test_a_foreign_thread_s_hold_passes_on_when_it_ends(
    seawall_redis: redis.Redis, kind: str
) -> None:
    lock, outsider = build(kind, seawall_redis)
    _, acquired = in_foreign_thread(lambda: lock.acquire(timeout=5.0))
    assert acquired is True
    # The thread ended holding it: like a finished threading.Thread's, its hold passes to
    # the next owner that releases while holding nothing.
    lock.release()
    assert_free(outsider)


# (A Semaphore lets one owner hold several permits: there an inherited hold shows nothing.)
@pytest.mark.parametrize("kind", ["lock", "rlock"])
def test_a_new_foreign_thread_with_a_dead_one_s_id_does_not_inherit_its_holds(
    seawall_redis: redis.Redis, kind: str
) -> None:
    lock, outsider = build(kind, seawall_redis)
    first, acquired = in_foreign_thread(lambda: lock.acquire(timeout=5.0))
    assert acquired is True
    for _ in range(50):
        # A new thread, usually given the dead one's id: it is a new owner, so it waits
        # its turn (here: does not get it) instead of being told it holds it already.
        ident, outcome = in_foreign_thread(lambda: lock.acquire(blocking=False))
        assert outcome is False, outcome
        if ident == first:
            break
    else:
        pytest.fail("no new thread was given the dead thread's id")  # pragma: no cover
    # The dead thread's hold is still there, and passes on (here to a foreign thread).
    _, released = in_foreign_thread(lock.release)
    assert released is None
    assert_free(outsider)


def test_foreign_threads_that_took_a_lock_leave_no_thread_behind(seawall_redis: Any) -> None:
    """threading.current_thread() in such a thread makes a dummy Thread that stays in
    threading.enumerate() for ever; taking a lock must not make one (15 threads left 15)."""
    lock = seawall.Lock(seawall_redis, f"foreign-leak-{next(_names)}", ttl=5)
    before = len(threading.enumerate())

    def take_and_give_back() -> bool:
        assert lock.acquire(timeout=5)
        lock.release()
        return True

    for _ in range(15):
        _, outcome = in_foreign_thread(take_and_give_back)
        assert outcome is True, outcome
    dummies = [t for t in threading.enumerate() if isinstance(t, threading._DummyThread)]
    assert not dummies, dummies
    assert len(threading.enumerate()) <= before + 1  # a pool's idle worker at most
