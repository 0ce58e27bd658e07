"""An asyncio event whose timed waits share one timer.

Many tasks wait on one event at once where seawall.aio shares work: the callers of a
key that one flight loads, the requests of a page that one rendering stores. With
`asyncio.timeout()` around `asyncio.Event.wait()`, each of them arms a timer of its own
and cancels it again when woken; for fifty callers that is most of the time they spend
between the reply and their answer. Here every waiter is a future in one list, and the
event keeps one timer, armed for the earliest deadline, that answers False to the waiters
whose time is up and is armed again for the rest.

Like asyncio.Event, it belongs to the event loop that first waits on it, and set() and
clear() are called from that loop; clear() leaves a waiter already woken woken.
"""

from __future__ import annotations

import asyncio
import math


class AsyncEvent:
    def __init__(self) -> None:
        self._set = False
        # Each waiting task's future and its deadline (a dict: a cancelled waiter leaves in
        # O(1), however many wait).
        self._waiters: dict[asyncio.Future[bool], float] = {}
        self._timer: asyncio.TimerHandle | None = None

    def set(self) -> None:
        if self._set:
            return
        self._set = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        waiters, self._waiters = self._waiters, {}
        for future in waiters:
            if not future.done():
                future.set_result(True)

    def clear(self) -> None:
        self._set = False

    def is_set(self) -> bool:
        return self._set

    async def wait(self, timeout: float | None) -> bool:
        """True once the event is set; False if `timeout` seconds pass first."""
        if self._set:
            return True
        loop = asyncio.get_running_loop()
        if timeout is not None and timeout <= 0:
            return False
        future: asyncio.Future[bool] = loop.create_future()
        deadline = math.inf if timeout is None else loop.time() + timeout
        self._waiters[future] = deadline
        if deadline != math.inf:
            timer = self._timer
            if timer is None or deadline < timer.when():
                if timer is not None:
                    timer.cancel()
                self._timer = loop.call_at(deadline, self._expire, loop)
        try:
            return await future
        finally:
            # Cancelled while waiting: its entry goes (set() and _expire took the others).
            self._waiters.pop(future, None)

    def _expire(self, loop: asyncio.AbstractEventLoop) -> None:
        """The timer: False to every waiter whose deadline has passed, and armed again for
        the earliest deadline left."""
        self._timer = None
        now = loop.time()
        left = {}
        for future, deadline in self._waiters.items():
            if future.done():
                continue
            if deadline <= now:
                future.set_result(False)
            else:
                left[future] = deadline
        self._waiters = left
        first = min(left.values(), default=math.inf)
        if first != math.inf:
            self._timer = loop.call_at(first, self._expire, loop)
