"""Owners for tests of lock objects shared by threads or tasks.

A seawall lock object keeps its holds per owner: the thread (sync) or the asyncio task
that acquired. Tests drive each owner explicitly: an owner runs every call it is given in
its own thread (ThreadOwner) or its own task (TaskOwner), awaited from the test's loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
from collections.abc import Callable
from typing import Any


class ThreadOwner:
    """An owner in the sync world: one thread that runs every call it is given."""

    def __init__(self) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)

    async def do(self, call: Callable[[], Any]) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, call)

    async def close(self) -> None:
        self._pool.shutdown(wait=False)


class TaskOwner:
    """An owner in the asyncio world: one task that runs (and awaits) every call it is given."""

    def __init__(self) -> None:
        self._calls: asyncio.Queue[Any] = asyncio.Queue()
        self._task = asyncio.create_task(self._serve())

    async def _serve(self) -> None:
        while True:
            call, done = await self._calls.get()
            if call is None:
                return
            try:
                result = call()
                if inspect.isawaitable(result):
                    result = await result
            except BaseException as exc:  # handed to the caller
                if not done.cancelled():
                    done.set_exception(exc)
            else:
                if not done.cancelled():
                    done.set_result(result)

    async def do(self, call: Callable[[], Any]) -> Any:
        done = asyncio.get_running_loop().create_future()
        await self._calls.put((call, done))
        return await done

    async def close(self) -> None:
        await self._calls.put((None, None))
        await self._task


def owner_for(world: str) -> ThreadOwner | TaskOwner:
    """A new owner of `world` ("sync" or "async"); make it inside the running loop."""
    return TaskOwner() if world == "async" else ThreadOwner()


class OwnerPerObject:
    """Gives every lock object an owner of its own, as tests written with one holder per
    object expect: all calls on that object (and reads of its fence) run in that owner."""

    def __init__(self, world: str) -> None:
        self.world = world
        self._owners: dict[int, tuple[Any, ThreadOwner | TaskOwner]] = {}

    def of(self, obj: Any) -> ThreadOwner | TaskOwner:
        found = self._owners.get(id(obj))
        if found is None or found[0] is not obj:
            found = self._owners[id(obj)] = (obj, owner_for(self.world))
        return found[1]

    async def call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await self.of(method.__self__).do(lambda: method(*args, **kwargs))

    async def fence(self, obj: Any) -> int:
        return int(await self.of(obj).do(lambda: obj.fence))

    async def close(self) -> None:
        for _, owner in self._owners.values():
            await owner.close()
