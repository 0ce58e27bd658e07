"""Connection slots (seawall.shared._concurrency): a bounded count of holders, bounded waits, and
no slot lost to a timeout, a hand-over or a cancelled waiter."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from seawall.shared._concurrency import AsyncSlots, Slots


def test_threads_never_hold_more_slots_than_there_are() -> None:
    slots = Slots(3)
    holding, most = 0, 0
    count = threading.Lock()

    def work() -> None:
        nonlocal holding, most
        for _ in range(300):
            assert slots.take_now() or slots.acquire(5.0)
            with count:
                holding += 1
                most = max(most, holding)
            time.sleep(0)
            with count:
                holding -= 1
            slots.release()

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert 1 <= most <= 3  # never more holders than slots
    assert [slots.take_now() for _ in range(4)] == [True, True, True, False]


def test_a_thread_waits_for_a_slot_and_times_out_without_one() -> None:
    slots = Slots(1)
    assert slots.take_now()
    started = time.monotonic()
    assert not slots.acquire(0.1)
    assert 0.09 <= time.monotonic() - started < 2.0
    threading.Timer(0.05, slots.release).start()
    assert slots.acquire(5.0)  # woken by the release
    assert not slots.take_now()
    slots.release()
    with pytest.raises(ValueError, match="more often than taken"):
        slots.release()


def test_tasks_share_slots_fairly_and_time_out() -> None:
    async def main() -> None:
        slots = AsyncSlots(1)
        assert slots.take_now()
        assert not await slots.acquire(0.05)
        order: list[int] = []

        async def wait(number: int) -> None:
            assert await slots.acquire(5.0)
            order.append(number)
            await asyncio.sleep(0.01)
            slots.release()

        waiters = [asyncio.create_task(wait(n)) for n in range(3)]
        await asyncio.sleep(0.01)
        assert not slots.take_now()  # queued waiters come first
        slots.release()
        await asyncio.gather(*waiters)
        assert order == [0, 1, 2]
        assert slots.take_now() and not slots.take_now()

    asyncio.run(main())


def test_a_cancelled_waiter_loses_no_slot() -> None:
    async def main() -> None:
        slots = AsyncSlots(1)
        assert slots.take_now()
        waiter = asyncio.create_task(slots.acquire(5.0))
        await asyncio.sleep(0.01)
        slots.release()  # handed to the waiter...
        waiter.cancel()  # ...which is cancelled before it runs again
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert slots.take_now()  # the slot came back
        queued = asyncio.create_task(slots.acquire(5.0))
        await asyncio.sleep(0.01)
        queued.cancel()  # cancelled while still queued
        with pytest.raises(asyncio.CancelledError):
            await queued
        slots.release()
        assert slots.take_now() and not slots.take_now()

    asyncio.run(main())
