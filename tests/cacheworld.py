"""Helpers for cache tests that play one scenario in both worlds (the sync Cache, or
seawall.aio's), on one server or on Cluster, and count what reaches the servers."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
from collections.abc import Callable, Iterator
from typing import Any

import redis.asyncio.connection
import redis.cluster
import redis.connection
from conftest import Target

import seawall
import seawall.aio

# Commands the suite's own background work sends now and then (listener health checks,
# the second-delete sweeper's look at its schedule, the cluster client's slot map, the
# counting client's own connections, a Cluster replica's acknowledgements to its master
# once a second): not the clear's, and not counted.
BACKGROUND = {
    "info",
    "ping",
    "zrange",
    "memory",
    "cluster",
    "command",
    "config",
    "client",
    "hello",
    "replconf",
}


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


@contextlib.contextmanager
def round_trips() -> Iterator[list[str]]:
    """Each write request redis-py sends ("send": GET, MGET, EVALSHA, EVAL, SCRIPT) and each
    reply to one it has read ("reply"), in order, sync and asyncio: a send after a reply is
    a round trip that waited for an earlier one. Only the caller's thread counts: what
    other threads send meanwhile (the listeners, the second-delete sweeper, another cache's
    background work) is left out. In asyncio every task of the loop counts: redis-py's
    Cluster client sends from tasks of its own."""
    events: list[str] = []
    counted: set[int] = set()  # connections whose last request is counted
    thread = threading.get_ident()

    patched = [redis.connection.AbstractConnection, redis.asyncio.connection.AbstractConnection]
    sends = [cls.send_packed_command for cls in patched]
    reads = [cls.read_response for cls in patched]

    def mine() -> bool:
        return threading.get_ident() == thread

    def sent(connection: Any, command: Any) -> None:
        if not mine():
            return
        first = command if isinstance(command, bytes | str) else command[0]
        head = first.encode() if isinstance(first, str) else bytes(first[:40])
        if any(name in head for name in (b"GET", b"EVAL", b"SCRIPT")):
            counted.add(id(connection))
            events.append("send")
        else:
            counted.discard(id(connection))

    def replied(connection: Any) -> None:
        if id(connection) in counted and mine():
            events.append("reply")

    def sync_send(self: Any, command: Any, *args: Any, **kwargs: Any) -> Any:
        sent(self, command)
        return sends[0](self, command, *args, **kwargs)

    def sync_read(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return reads[0](self, *args, **kwargs)
        finally:
            replied(self)

    async def async_send(self: Any, command: Any, *args: Any, **kwargs: Any) -> Any:
        sent(self, command)
        return await sends[1](self, command, *args, **kwargs)

    async def async_read(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await reads[1](self, *args, **kwargs)
        finally:
            replied(self)

    patched[0].send_packed_command, patched[0].read_response = sync_send, sync_read  # type: ignore[method-assign]
    patched[1].send_packed_command, patched[1].read_response = async_send, async_read  # type: ignore[method-assign]
    try:
        yield events
    finally:
        for cls, send, read in zip(patched, sends, reads, strict=True):
            cls.send_packed_command, cls.read_response = send, read  # type: ignore[method-assign]


def waits(events: list[str]) -> int:
    """Round trips made one after another: 1 when every request went out before any reply."""
    return 1 + sum(1 for i, event in enumerate(events) if event == "send" and "reply" in events[:i])


class Requests:
    def __init__(self) -> None:
        self.heads: list[bytes] = []  # the start of each request, for failure messages

    @property
    def count(self) -> int:
        return len(self.heads)


@contextlib.contextmanager
def requests_sent() -> Iterator[Requests]:
    """Requests redis-py writes (sync and asyncio) while the block runs: one per command
    or pipeline (per node on Cluster), each a round trip. What the process does in the
    background, which may fall in any window, is left out: the pub/sub listeners'
    keep-alive PINGs, the second-delete sweepers' look at their schedules (a MEMORY
    USAGE, or a ZRANGE, when one is opened or due, see cache/_async/again.py) and the
    handshake of a connection such a background caller opens (CLIENT SETINFO: the calls
    measured reuse warm connections)."""
    counted = Requests()
    patched = [redis.connection.AbstractConnection, redis.asyncio.connection.AbstractConnection]
    originals = [cls.send_packed_command for cls in patched]

    def count(command: Any) -> None:
        parts = [command] if isinstance(command, bytes | str) else command
        sent = b"".join(p.encode() if isinstance(p, str) else bytes(p) for p in parts)
        head = sent[:40]
        if b"PING" not in head and b"SETINFO" not in head and b"cache-again" not in sent:
            counted.heads.append(sent[:160])

    def sync_send(self: Any, command: Any, *args: Any, **kwargs: Any) -> Any:
        count(command)
        return originals[0](self, command, *args, **kwargs)

    async def async_send(self: Any, command: Any, *args: Any, **kwargs: Any) -> Any:
        count(command)
        return await originals[1](self, command, *args, **kwargs)

    patched[0].send_packed_command = sync_send  # type: ignore[method-assign]
    patched[1].send_packed_command = async_send  # type: ignore[method-assign]
    try:
        yield counted
    finally:
        for cls, original in zip(patched, originals, strict=True):
            cls.send_packed_command = original  # type: ignore[method-assign]
