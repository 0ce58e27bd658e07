"""Helpers for cache tests that play one scenario in both worlds (the sync Cache, or
seawall.aio's), on one server or on Cluster, and count what reaches the servers."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable
from typing import Any

import redis.cluster
from conftest import Target

import seawall
import seawall.aio

# Commands the suite's own background work sends now and then (listener health checks,
# the second-delete sweeper's look at its schedule, the cluster client's slot map, the
# counting client's own connections): not the clear's, and not counted.
BACKGROUND = {"info", "ping", "zrange", "cluster", "command", "config", "client", "hello"}


class World:
    """One scenario for both worlds: the sync Cache called from a coroutine (blocking is
    fine here), or seawall.aio's, awaited."""

    def __init__(self, world: str, target: Target) -> None:
        self.world, self.target = world, target
        self._clients: list[Any] = []

    def client(self) -> Any:
        client = self.target.sync() if self.world == "sync" else self.target.aio()
        self._clients.append(client)
        return client

    def cache(self, name: str, client: Any = None, **options: Any) -> Any:
        kind = seawall.Cache if self.world == "sync" else seawall.aio.Cache
        return kind(self.client() if client is None else client, name, **options)

    def gate(self) -> Any:
        return threading.Event() if self.world == "sync" else asyncio.Event()

    def loader(self, gate: Any, started: Any, value: Any) -> Callable[[], Any]:
        """A loader that reads `value` at once, then waits for `gate` before answering,
        as a database read overtaken by what happens meanwhile."""
        if self.world == "sync":

            def load() -> Any:
                started.set()
                assert gate.wait(20)
                return value

            return load

        async def load_async() -> Any:
            started.set()
            await asyncio.wait_for(gate.wait(), 20)
            return value

        return load_async

    def background(self, call: Callable[[], Any]) -> Any:
        """Run `call()` concurrently; `await self.result(handle)` gives its answer."""
        if self.world == "sync":
            box: list[Any] = []
            thread = threading.Thread(target=lambda: box.append(call()), daemon=True)
            thread.start()
            return (thread, box)
        return asyncio.ensure_future(call())

    async def result(self, handle: Any) -> Any:
        if self.world == "sync":
            thread, box = handle
            await asyncio.to_thread(thread.join, 20)
            assert box, "the background call did not finish"
            return box[0]
        return await asyncio.wait_for(handle, 20)

    async def wait_started(self, started: Any) -> None:
        if self.world == "sync":
            assert await asyncio.to_thread(started.wait, 20)
        else:
            await asyncio.wait_for(started.wait(), 20)

    async def close(self) -> None:
        if self.world == "async":
            for client in self._clients:
                await client.aclose()


async def do(result: Any) -> Any:
    """`result`, awaited when the asyncio Cache gave a coroutine."""
    return await result if inspect.isawaitable(result) else result


def play(world: str, target: Target, scenario: Callable[[World], Any]) -> None:
    async def main() -> None:
        face = World(world, target)
        try:
            await scenario(face)
        finally:
            await face.close()

    asyncio.run(main())


def command_calls(target: Target) -> dict[str, int]:
    """Calls per command since the servers started (all primaries on Cluster)."""
    admin = target.sync()
    if target.cluster:
        per_node = admin.info("commandstats", target_nodes=redis.cluster.RedisCluster.PRIMARIES)
        stats = list(per_node.values())
    else:
        stats = [admin.info("commandstats")]
    calls: dict[str, int] = {}
    for node in stats:
        for name, figures in node.items():
            command = name.removeprefix("cmdstat_").split("|")[0].lower()
            calls[command] = calls.get(command, 0) + int(figures["calls"])
    return calls
