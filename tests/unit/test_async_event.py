"""seawall.shared._async_event.AsyncEvent: the event the tasks sharing a flight wait on,
whose timed waits share one timer. Each waiter keeps its own deadline."""

from __future__ import annotations

import asyncio

from seawall.shared._async_event import AsyncEvent


def test_set_wakes_every_waiter_and_later_waits_return_at_once() -> None:
    async def main() -> None:
        event = AsyncEvent()
        waiters = [asyncio.ensure_future(event.wait(30.0)) for _ in range(50)]
        waiters.append(asyncio.ensure_future(event.wait(None)))
        await asyncio.sleep(0.01)
        assert not any(w.done() for w in waiters)
        event.set()
        assert await asyncio.gather(*waiters) == [True] * 51
        assert await event.wait(0) is True
        assert event._timer is None and not event._waiters  # nothing left armed

    asyncio.run(main())


def test_each_waiter_times_out_at_its_own_deadline() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        event = AsyncEvent()
        started = loop.time()
        ended: dict[float, float] = {}

        async def wait(timeout: float) -> bool:
            answer = await event.wait(timeout)
            ended[timeout] = loop.time() - started
            return answer

        # The longest first: a shorter deadline that comes later re-arms the one timer.
        waits = [asyncio.ensure_future(wait(t)) for t in (0.6, 0.2, 0.4)]
        await asyncio.sleep(0)
        assert event._timer is not None
        assert event._timer.when() - started < 0.3, "armed for the earliest deadline"
        assert await asyncio.gather(*waits) == [False, False, False]
        for timeout, took in ended.items():
            assert timeout <= took < timeout + 10, ended  # never early; late only if stalled
        assert not event._waiters and event._timer is None

    asyncio.run(main())


def test_a_set_after_some_timed_out_wakes_the_rest() -> None:
    async def main() -> None:
        event = AsyncEvent()
        short = asyncio.ensure_future(event.wait(0.05))
        long = asyncio.ensure_future(event.wait(30.0))
        assert await short is False
        assert not long.done()
        event.set()
        assert await long is True

    asyncio.run(main())


def test_a_cancelled_waiter_leaves_no_entry_and_the_others_still_wait() -> None:
    async def main() -> None:
        event = AsyncEvent()
        cancelled = asyncio.ensure_future(event.wait(30.0))
        kept = asyncio.ensure_future(event.wait(30.0))
        await asyncio.sleep(0)
        cancelled.cancel()
        await asyncio.gather(cancelled, return_exceptions=True)
        assert cancelled.cancelled()
        assert len(event._waiters) == 1
        event.set()
        assert await kept is True

    asyncio.run(main())


def test_clear_leaves_the_woken_woken_and_makes_new_waits_wait() -> None:
    async def main() -> None:
        event = AsyncEvent()
        woken = asyncio.ensure_future(event.wait(30.0))
        await asyncio.sleep(0)
        event.set()
        event.clear()  # before the woken task has run
        assert not event.is_set()
        assert await woken is True
        assert await event.wait(0.05) is False
        assert await event.wait(0) is False

    asyncio.run(main())
