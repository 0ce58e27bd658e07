"""Code that runs in child processes of the invalidation tests (multiprocessing "spawn").

The child is process B: it registers a stand-in L1 for namespace "users" and records, with
time.monotonic_ns() (one clock for all processes on Linux), when each key was discarded
and when the whole L1 was cleared.
"""

from __future__ import annotations

import asyncio
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

from lockworkers import async_client, sync_client
from waiting import eventually

from seawall.cache._async.invalidation import get_invalidator as get_async_invalidator
from seawall.cache._sync.invalidation import get_invalidator


class RecordingL1:
    """A dict-backed L1 that notes when keys leave it. Called from the listener's thread
    in the sync world, hence the lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.data: dict[str, Any] = {}
        self.discarded: dict[str, int] = {}  # key -> first discard time (ns)
        self.clears: list[int] = []

    def discard(self, key: str) -> None:
        now = time.monotonic_ns()
        with self.lock:
            self.data.pop(key, None)
            self.discarded.setdefault(key, now)

    def clear(self) -> None:
        now = time.monotonic_ns()
        with self.lock:
            self.data.clear()
            self.clears.append(now)


def _serve(l1: RecordingL1, invalidator: Any, pipe: Connection) -> None:
    """Answer the test's commands until ("stop",); runs in a thread in the async world."""
    while True:
        command = pipe.recv()
        kind = command[0]
        if kind == "stop":
            return
        if kind == "collect":  # wait for `count` discards
            _, count, timeout = command
            eventually(lambda count=count: len(l1.discarded) >= count, timeout, 0.002)
            with l1.lock:
                pipe.send(dict(l1.discarded))
        elif kind == "fill":  # put keys in L1, as a cache would after reading Redis
            with l1.lock:
                l1.data.update(dict.fromkeys(command[1], "value"))
                pipe.send((len(l1.clears), invalidator.generation))
        elif kind == "await_clear":  # wait for a clear after `seen` earlier ones
            _, seen, timeout = command
            eventually(lambda seen=seen: len(l1.clears) > seen, timeout, 0.002)
            relisten = eventually(lambda: invalidator.listening, timeout, 0.002)
            with l1.lock:
                first = l1.clears[seen] if len(l1.clears) > seen else None
                pipe.send((first, len(l1.data), invalidator.generation, relisten))


def listener(url: str, cluster: bool, world: str, pipe: Connection) -> None:
    if world == "async":
        asyncio.run(_listener_async(url, cluster, pipe))
        return
    client = sync_client(url, cluster)
    invalidator = get_invalidator(client)
    l1 = RecordingL1()
    invalidator.register("users", l1)
    pipe.send(("ready", invalidator.wait_listening(20)))
    _serve(l1, invalidator, pipe)
    client.close()


async def _listener_async(url: str, cluster: bool, pipe: Connection) -> None:
    client = async_client(url, cluster)
    invalidator = get_async_invalidator(client)
    l1 = RecordingL1()
    invalidator.register("users", l1)
    pipe.send(("ready", await invalidator.wait_listening(20)))
    # The commands block; the listener task keeps running in this loop meanwhile.
    await asyncio.to_thread(_serve, l1, invalidator, pipe)
    await client.aclose()
