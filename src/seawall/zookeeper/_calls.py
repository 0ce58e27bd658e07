"""What differs between the sync and asyncio ZooKeeper locks, in one place.

kazoo is thread-based: each call returns an IAsyncResult settled by kazoo's own thread,
and watches fire on that thread. The sync lock waits on them directly; the asyncio lock
hands the result to its event loop, so no thread is blocked per waiting task.
`scripts/unasync.py` maps the `async_*` / `Async*` names to the plain ones.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from seawall.shared import _concurrency


def _remaining(deadline: float | None) -> float | None:
    return None if deadline is None else max(deadline - _concurrency.monotonic(), 0.0)


async def async_result(pending: Any, deadline: float | None) -> Any:
    """The value of kazoo's `pending` IAsyncResult; TimeoutError if not settled by
    `deadline` (monotonic, None for no bound); kazoo's error when it failed."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(_: Any) -> None:
        loop.call_soon_threadsafe(_copy, pending, future)

    pending.rawlink(settle)
    async with asyncio.timeout(_remaining(deadline)):
        return await future


def _copy(pending: Any, future: asyncio.Future[Any]) -> None:
    if future.done():
        return
    exc = pending.exception
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(pending.value)


def result(pending: Any, deadline: float | None) -> Any:
    if not pending.wait(_remaining(deadline)):
        raise TimeoutError("ZooKeeper did not answer in time")
    return pending.get_nowait()


class AsyncSignal:
    """An event that kazoo's thread may set (a watch firing) and a task waits on."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._event = asyncio.Event()

    def set(self, *_: object) -> None:
        """Set it (from any thread; a kazoo watch passes its event, ignored)."""
        self._loop.call_soon_threadsafe(self._event.set)

    async def wait(self, timeout: float) -> bool:
        try:
            async with asyncio.timeout(timeout):
                await self._event.wait()
        except TimeoutError:
            return False
        return True


class Signal:
    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self, *_: object) -> None:
        """Set it (from any thread; a kazoo watch passes its event, ignored)."""
        self._event.set()

    def wait(self, timeout: float) -> bool:
        return self._event.wait(timeout)
