"""The deadline `until` sets: per thread, nested (the earlier wins), restored on exit."""

from __future__ import annotations

import threading

from seawall.shared._bounded import current_deadline, until


def test_until_nests_and_restores() -> None:
    assert current_deadline() is None
    with until(100.0):
        assert current_deadline() == 100.0
        with until(200.0):
            assert current_deadline() == 100.0  # the earlier deadline wins
        with until(50.0):
            assert current_deadline() == 50.0
        with until(None):
            assert current_deadline() == 100.0
        assert current_deadline() == 100.0
    assert current_deadline() is None


def test_a_deadline_belongs_to_its_thread() -> None:
    seen: list[float | None] = []
    inside = threading.Event()
    done = threading.Event()

    def other() -> None:
        seen.append(current_deadline())
        with until(7.0):
            inside.set()
            done.wait(5)
            seen.append(current_deadline())

    with until(3.0):
        thread = threading.Thread(target=other)
        thread.start()
        assert inside.wait(5)
        assert current_deadline() == 3.0  # the other thread's deadline is not ours
        done.set()
        thread.join(5)
    assert seen == [None, 7.0]
    assert current_deadline() is None
