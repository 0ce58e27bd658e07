"""A redis-py asyncio client that loses a cancellation, as redis-py's read sometimes does
(the call then answers after the cancel): for tests that a cancelled caller still stops."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import redis.asyncio


class SwallowingClient(redis.asyncio.Redis):
    """A client whose next call of `armed` (a command name: "EVALSHA" for a script) loses
    the cancellation that lands during it and answers afterwards, as redis-py's read
    sometimes does. `entered` is set once that call has begun."""

    armed = ""
    entered: asyncio.Event

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        if not (self.armed and str(args[0]).upper() == self.armed):
            return await super().execute_command(*args, **options)
        self.armed = ""
        self.entered.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(30)  # the cancel lands here, and is lost
        return await super().execute_command(*args, **options)
