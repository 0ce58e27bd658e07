"""A redis-py asyncio client that loses a cancellation, as redis-py's read sometimes does
(the call then answers after the cancel): for tests that a cancelled caller still stops."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

import redis.asyncio


class SwallowingClient(redis.asyncio.Redis):
    """A client whose next call of `armed` (a command name: "EVALSHA" for a script) loses
    the cancellation that lands during it and answers afterwards. `entered` is set once
    that call has begun."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.armed = ""
        self.entered = asyncio.Event()
        # True: the armed call runs on the server first, and the cancel that lands while
        # its reply is on the way is raised, not lost (the server did the work, the caller
        # never learns of it).
        self.late_reply = False

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        if not (self.armed and str(args[0]).upper() == self.armed):
            return await super().execute_command(*args, **options)
        self.armed = ""
        if self.late_reply:
            await super().execute_command(*args, **options)
            self.entered.set()
            await asyncio.sleep(30)  # the cancel lands here and is raised
        self.entered.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(30)  # the cancel lands here, and is lost
        return await super().execute_command(*args, **options)


async def cancelled_in(
    client: SwallowingClient, command: str, start: Callable[[], Awaitable[Any]], give: float
) -> tuple[float, bool]:
    """Run `start()` as a task and cancel it during its call of `command`, which loses the
    cancel. Returns the seconds from the cancel to the task's end (at most `give`: a task
    still running then is cancelled again) and whether it ended cancelled."""
    client.armed = command
    task = asyncio.create_task(start())
    await asyncio.wait_for(client.entered.wait(), 10)
    started = time.monotonic()
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=give)
    took = time.monotonic() - started
    if not done:
        task.cancel()  # the fault found: stop it for good
        await asyncio.wait({task}, timeout=give)
    return took, bool(done) and task.cancelled()
