"""Wake-ups for blocked acquirers: one pub/sub connection per client, per process or loop.

Waiters for one lock name in one process queue up locally (FIFO); only the head of that
queue talks to Redis, so 1,000 threads blocked on a lock use one pool connection for their
retries plus this waker's single pub/sub connection. A release publishes on the lock's
channel; the waker wakes that channel's head, which retries at once.

Pub/sub loses messages while its connection is down. Every wait is therefore bounded
(`_lease.wait_slice`), and after a reconnect every head is woken to look again.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
import weakref
from collections import deque
from types import TracebackType
from typing import Any, cast

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from seawall import _concurrency
from seawall._concurrency import AsyncEvent, AsyncWorker, ScopedRegistry, async_scope, async_sleep
from seawall._validate import AsyncClient

# Channels nobody waits on are unsubscribed after this long (saves a round trip per wait
# under steady contention); the listener exits after IDLE_EXIT with no channel at all.
LINGER = 5.0
IDLE_EXIT = 10.0
POLL = 1.0
RECONNECT_BACKOFF = 0.05


class _Waiter:
    __slots__ = ("signal", "turn")

    def __init__(self) -> None:
        self.turn = AsyncEvent()  # set when this waiter is the head of its queue
        self.signal = AsyncEvent()  # set when the lock may have become free


class _Channel:
    __slots__ = ("confirmed", "idle_since", "name", "queue", "requested")

    def __init__(self, name: str) -> None:
        self.name = name
        self.queue: deque[_Waiter] = deque()
        self.requested = False  # SUBSCRIBE sent on the current connection
        self.confirmed = AsyncEvent()  # the server acknowledged it
        self.idle_since: float | None = None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class AsyncTurn:
    """A place in the local queue of one lock name; `async with waker.turn(channel)`."""

    def __init__(self, waker: AsyncWaker, channel: str) -> None:
        self._waker = waker
        self._name = channel
        self._waiter = _Waiter()
        self._channel: _Channel | None = None

    async def __aenter__(self) -> AsyncTurn:
        self._channel = self._waker._join(self._name, self._waiter)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._channel is not None
        self._waker._leave(self._channel, self._waiter)

    async def wait_turn(self, timeout: float | None) -> bool:
        """Wait to become the head of the local queue; False on timeout."""
        return await self._waiter.turn.wait(timeout)

    @property
    def listening(self) -> bool:
        return self._channel is not None and self._channel.confirmed.is_set()

    async def listen(self, timeout: float | None) -> None:
        """Subscribe to the channel (once per process) and wait for the acknowledgement."""
        assert self._channel is not None
        await self._waker._subscribe(self._channel, timeout)

    async def wait_signal(self, timeout: float) -> bool:
        """Wait for a release signal; False when `timeout` passed without one."""
        signalled = await self._waiter.signal.wait(timeout)
        self._waiter.signal.clear()
        return signalled


class AsyncWaker:
    def __init__(self, client: AsyncClient) -> None:
        # Weak: the registry is keyed by the client, and a strong reference here would keep
        # every client ever used alive.
        self._client = weakref.ref(client)
        self._mutex = threading.Lock()
        self._channels: dict[str, _Channel] = {}
        self._pubsub: Any = None
        self._ready = AsyncEvent()
        self._worker: AsyncWorker | None = None
        self._home = f"seawall:waker:{uuid.uuid4().hex}"
        self._home_acks = 0

    def turn(self, channel: str) -> AsyncTurn:
        return AsyncTurn(self, channel)

    def subscribed(self) -> list[str]:
        """Channels currently subscribed (for tests and diagnostics)."""
        with self._mutex:
            return [c.name for c in self._channels.values() if c.confirmed.is_set()]

    def running(self) -> bool:
        with self._mutex:
            return self._worker is not None and self._worker.alive()

    def _join(self, name: str, waiter: _Waiter) -> _Channel:
        with self._mutex:
            channel = self._channels.get(name)
            if channel is None:
                channel = self._channels[name] = _Channel(name)
            channel.queue.append(waiter)
            channel.idle_since = None
            if len(channel.queue) == 1:
                waiter.turn.set()
            return channel

    def _leave(self, channel: _Channel, waiter: _Waiter) -> None:
        with self._mutex:
            was_head = channel.queue and channel.queue[0] is waiter
            channel.queue.remove(waiter)
            if not channel.queue:
                channel.idle_since = _concurrency.monotonic()
            elif was_head:
                # The new head looks at once: the lock may be free, and a signal meant for
                # the old head must not be lost with it.
                head = channel.queue[0]
                head.turn.set()
                head.signal.set()

    async def _subscribe(self, channel: _Channel, timeout: float | None) -> None:
        with self._mutex:
            if self._worker is None or not self._worker.alive():
                self._ready.clear()
                self._worker = AsyncWorker(self._run, "seawall-waker")
        if not await self._ready.wait(timeout):
            return
        with self._mutex:
            send = not channel.requested
            channel.requested = True
            pubsub = self._pubsub
        if send and pubsub is not None:
            try:
                await pubsub.subscribe(channel.name)
            except (RedisConnectionError, RedisTimeoutError, OSError):
                with self._mutex:
                    channel.requested = False
                return
        await channel.confirmed.wait(timeout)

    def _wake_all(self) -> None:
        with self._mutex:
            for channel in self._channels.values():
                if channel.queue:
                    channel.queue[0].signal.set()

    def _reset_channels(self) -> None:
        with self._mutex:
            for channel in self._channels.values():
                channel.requested = False
                channel.confirmed.clear()

    def _on_message(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        name = _text(message["channel"])
        if name == self._home:
            if kind == "subscribe":
                self._home_acks += 1
                if self._home_acks > 1:
                    # The client reconnected and re-subscribed on its own: releases may
                    # have been missed meanwhile.
                    self._wake_all()
            return
        with self._mutex:
            channel = self._channels.get(name)
            if channel is None:
                return
            if kind == "message":
                if channel.queue:
                    channel.queue[0].signal.set()
            elif kind == "subscribe":
                if channel.confirmed.is_set() and channel.queue:
                    channel.queue[0].signal.set()  # a re-subscribe after a reconnect
                channel.confirmed.set()
            elif kind == "unsubscribe" and channel.requested:
                # The unsubscribe of an idle channel crossed a new waiter's subscribe:
                # make that waiter subscribe again.
                channel.requested = False
                channel.confirmed.clear()
                if channel.queue:
                    channel.queue[0].signal.set()

    async def _drop_idle(self, pubsub: Any) -> bool:
        """Unsubscribe lingering channels; True when the listener may exit."""
        now = _concurrency.monotonic()
        with self._mutex:
            idle = [
                c
                for c in self._channels.values()
                if not c.queue and c.idle_since is not None and now - c.idle_since > LINGER
            ]
            for channel in idle:
                del self._channels[channel.name]
            names = [c.name for c in idle if c.requested]
            quiet = not self._channels
        if names:
            await pubsub.unsubscribe(*names)
        return quiet

    async def _quiet_for(self, quiet_since: float) -> bool:
        """True (and the listener is detached) once no channel was wanted for IDLE_EXIT."""
        if _concurrency.monotonic() - quiet_since <= IDLE_EXIT:
            return False
        with self._mutex:
            if self._channels:
                return False
            self._worker = None
            self._pubsub = None
            self._ready.clear()
            return True

    async def _open(self) -> Any:
        client = self._client()
        if client is None:
            return None
        pubsub = cast(Any, client).pubsub()  # typed in redis.asyncio, untyped in redis
        await pubsub.subscribe(self._home)
        return pubsub

    async def _run(self) -> None:
        pubsub: Any = None
        quiet_since = _concurrency.monotonic()
        try:
            while True:
                if pubsub is None:
                    try:
                        pubsub = await self._open()
                    except Exception as exc:
                        _concurrency.log.debug("seawall: waker cannot connect: %r", exc)
                        if await self._quiet_for(quiet_since):
                            return
                        await async_sleep(RECONNECT_BACKOFF)
                        continue
                    if pubsub is None:
                        return
                    with self._mutex:
                        self._pubsub = pubsub
                    self._ready.set()
                try:
                    message = await pubsub.get_message(timeout=POLL)
                except Exception as exc:
                    # Not only ConnectionError: when the user closes the client under us, the
                    # parser can fail with anything. Start over on a fresh connection.
                    _concurrency.log.debug("seawall: waker connection failed: %r", exc)
                    self._ready.clear()
                    with self._mutex:
                        self._pubsub = None
                    self._reset_channels()
                    self._wake_all()
                    await _close(pubsub)
                    pubsub = None
                    await async_sleep(RECONNECT_BACKOFF)
                    continue
                if message is not None:
                    self._on_message(message)
                    continue
                if not await self._drop_idle(pubsub):
                    quiet_since = _concurrency.monotonic()
                elif await self._quiet_for(quiet_since):
                    return
        finally:
            if pubsub is not None:
                await _close(pubsub)


async def _close(pubsub: Any) -> None:
    # Closing a broken connection may fail again; there is nothing left to do then.
    with contextlib.suppress(Exception):
        await pubsub.aclose()


_registry = ScopedRegistry()


def get_waker(client: AsyncClient) -> AsyncWaker:
    """The waker for `client` in the running event loop."""
    return _registry.get(async_scope(), client, lambda: AsyncWaker(client))
