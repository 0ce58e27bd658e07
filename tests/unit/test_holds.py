"""The per-owner hold table and threading-style acquire arguments: pure, no server."""

from __future__ import annotations

import gc
import threading

import pytest

from seawall.locks._holds import Hold, HoldTable
from seawall.shared._validate import check_acquire_wait


class Owner:
    """Stands for a thread or task: any weakly referenceable object."""


def hold(owner: object, fence: int) -> Hold:
    return Hold(f"token-{fence}", fence, owner, 1.0, 0.0)


def test_each_owner_has_its_own_holds_and_fence() -> None:
    table = HoldTable()
    a, b = Owner(), Owner()
    first = hold(a, 1)
    table.add(first)
    table.add(hold(b, 2))
    assert table.fence(a) == 1 and table.fence(b) == 2
    assert table.current(a) is first
    assert table.take(a) is first and first.released
    assert table.current(a) is None and table.take(a) is None
    assert table.fence(a) == 1  # its last fence, not b's
    assert table.count() == 1
    assert table.fence(Owner()) is None


def test_newest_hold_first_and_fence_of_the_newest_still_held() -> None:
    table = HoldTable()
    a = Owner()
    table.add(hold(a, 5))
    table.add(hold(a, 6))
    assert table.fence(a) == 6
    assert table.take(a).fence == 6  # type: ignore[union-attr]
    assert table.fence(a) == 5
    assert table.take(a).fence == 5  # type: ignore[union-attr]
    assert table.fence(a) == 6  # the last one it took


def test_a_finished_owner_takes_its_entry_with_it() -> None:
    table = HoldTable()
    a = Owner()
    table.add(hold(a, 1))
    table.take(a)
    del a
    gc.collect()
    assert table.count() == 0 and len(table._holds) == 0 and len(table._last_fence) == 0


def test_a_finished_threads_hold_passes_to_the_next_releaser() -> None:
    """threading.Lock lets another thread release; asyncio.wait_for on Python 3.11 acquires
    in a task of its own. A hold whose owner is gone passes to whoever releases next."""
    table = HoldTable()
    granted: list[Hold] = []
    worker = threading.Thread(target=lambda: granted.append(hold(threading.current_thread(), 7)))
    worker.start()
    worker.join()
    table.add(granted[0])
    me = threading.current_thread()
    assert table.current(me) is None  # an acquire does not take it over
    assert table.fence(me) == 7
    taken = table.take(me)
    assert taken is granted[0] and taken.released and taken.owner is me
    assert table.count() == 0


def test_a_live_owners_hold_is_never_taken_over() -> None:
    """A paused (still running) owner keeps its hold: its late release is its own."""
    table = HoldTable()
    release = threading.Event()
    started = threading.Event()
    granted: list[Hold] = []

    def paused_owner() -> None:
        granted.append(hold(threading.current_thread(), 3))
        started.set()
        release.wait(10)

    worker = threading.Thread(target=paused_owner)
    worker.start()
    try:
        started.wait(10)
        table.add(granted[0])
        me = threading.current_thread()
        assert table.take(me) is None
        assert table.fence(me) is None
        assert table.current(me, adopt=True) is None
    finally:
        release.set()
        worker.join()


@pytest.mark.parametrize(
    ("blocking", "timeout", "error"),
    [
        (False, 1, ValueError),  # a timeout with a non-blocking call
        (False, 0, ValueError),
        (True, -2, ValueError),
        (True, -0.5, ValueError),
        (True, 1e100, OverflowError),
        (True, threading.TIMEOUT_MAX * 2, OverflowError),
        (True, "1", TypeError),
    ],
)
def test_acquire_arguments_refused_as_threading_refuses_them(
    blocking: bool, timeout: object, error: type[Exception]
) -> None:
    with pytest.raises(error, match="lock 'x'"):
        check_acquire_wait(blocking, timeout, 5.0, lambda: "lock 'x'")


def test_acquire_arguments_accepted() -> None:
    assert check_acquire_wait(True, None, 5.0, lambda: "lock 'x'") == 5.0  # the object's own
    assert check_acquire_wait(True, -1, 5.0, lambda: "lock 'x'") is None  # no limit
    assert check_acquire_wait(False, -1, 5.0, lambda: "lock 'x'") is None
    assert check_acquire_wait(False, None, None, lambda: "lock 'x'") is None
    longest = threading.TIMEOUT_MAX
    assert check_acquire_wait(True, longest, None, lambda: "lock 'x'") == longest
    assert check_acquire_wait(True, 0, None, lambda: "lock 'x'") == 0.0
