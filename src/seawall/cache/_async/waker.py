"""Wake-ups for callers waiting on another process's load: one pub/sub channel per process.

A caller that finds a key being loaded elsewhere puts its process's id in the key's set of
waiters (inside the same fetch script, no extra round trip). The script that stores the
value, or gives the lease back, publishes the key to each waiting process's own channel;
this listener wakes the local callers waiting for that key. A write-back sends the value
along with the token of the lease it was written under (`Watch.landed`): a waiter that saw
that very lease takes it without reading Redis again; otherwise it reads the value at once.

Pub/sub loses messages while its connection is down and a loader may die, so every wait is
also bounded by the lease's remaining time: a caller that hears nothing looks again when the
lease has run out, and takes it over.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
import weakref
from typing import Any

from seawall.cache._codec import CACHE_WAKE_PREFIX
from seawall.locks._async.waker import open_pubsub
from seawall.shared import _concurrency
from seawall.shared._concurrency import (
    AsyncEvent,
    AsyncWorker,
    ScopedRegistry,
    async_raise_if_cancelled,
    async_scope,
    async_sleep,
)
from seawall.shared._validate import AsyncClient

# The listener exits after this long with nobody waiting; POLL is how often it looks.
IDLE_EXIT = 10.0
POLL = 1.0
RECONNECT_BACKOFF = 0.05


class Watch:
    """One caller's interest in a key: `event` is set on a wake-up, `landed` holds what
    a write-back sent: (lease token, fresh ms, payload), or None."""

    __slots__ = ("event", "landed")

    def __init__(self) -> None:
        self.event = AsyncEvent()
        self.landed: tuple[bytes, int, bytes] | None = None

    def reset(self) -> None:
        self.landed = None
        self.event.clear()


def parse_wake(data: Any) -> tuple[str, tuple[bytes, int, bytes] | None]:
    """(value hash's name, what a write-back sent or None) from a wake-up message."""
    raw = data.encode() if isinstance(data, str) else bytes(data)
    colon = raw.index(b":")
    end = colon + 1 + int(raw[:colon])
    key = raw[colon + 1 : end].decode()
    if end == len(raw):
        return key, None
    token, fresh, payload = raw[end:].split(b":", 2)
    return key, (token, int(fresh), payload)


class AsyncCacheWaker:
    def __init__(self, client: AsyncClient) -> None:
        # Weak: the registry is keyed by the client; a strong reference would keep it alive.
        self._client = weakref.ref(client)
        self._mutex = threading.Lock()
        self._watchers: dict[str, set[Watch]] = {}
        self.id = uuid.uuid4().hex
        self._channel = CACHE_WAKE_PREFIX + self.id
        self._ready = AsyncEvent()
        self._worker: AsyncWorker | None = None

    @property
    def ready(self) -> bool:
        """Whether the channel is listened to, so queueing under `id` may be woken."""
        return self._ready.is_set()

    async def start(self, timeout: float) -> bool:
        """Start the listener (once) and wait until it is subscribed; False on timeout."""
        with self._mutex:
            if self._worker is None or not self._worker.alive():
                self._ready.clear()
                self._worker = AsyncWorker(self._run, "seawall-cache-waker")
        return await self._ready.wait(timeout)

    def watch(self, key: str) -> Watch:
        """Woken when a value for `key` (a value hash's name) lands or is voided."""
        watch = Watch()
        with self._mutex:
            self._watchers.setdefault(key, set()).add(watch)
        return watch

    def unwatch(self, key: str, watch: Watch) -> None:
        with self._mutex:
            found = self._watchers.get(key)
            if found is not None:
                found.discard(watch)
                if not found:
                    del self._watchers[key]

    def _wake(self, data: Any) -> None:
        try:
            key, landed = parse_wake(data)
        except (ValueError, UnicodeDecodeError):
            _concurrency.log.debug("cache waker ignored a malformed wake-up")
            return
        with self._mutex:
            for watch in self._watchers.get(key, ()):
                watch.landed = landed
                watch.event.set()

    def _wake_all(self) -> None:
        with self._mutex:
            for watches in self._watchers.values():
                for watch in watches:
                    watch.landed = None
                    watch.event.set()

    def _detach_if_idle(self, quiet_since: float) -> bool:
        if _concurrency.monotonic() - quiet_since <= IDLE_EXIT:
            return False
        with self._mutex:
            if self._watchers:
                return False
            self._worker = None
            self._ready.clear()
            return True

    async def _run(self) -> None:
        pubsub: Any = None
        acks = 0
        quiet_since = _concurrency.monotonic()
        try:
            while True:
                if pubsub is None:
                    client = self._client()
                    if client is None:
                        with self._mutex:
                            self._worker = None
                        return
                    try:
                        pubsub = open_pubsub(client)
                        await pubsub.subscribe(self._channel)
                    except Exception as exc:
                        async_raise_if_cancelled()
                        _concurrency.log.debug("cache waker cannot connect: %r", exc)
                        pubsub = None
                        if self._detach_if_idle(quiet_since):
                            return
                        await async_sleep(RECONNECT_BACKOFF)
                        continue
                try:
                    message = await pubsub.get_message(timeout=POLL)
                except Exception as exc:
                    async_raise_if_cancelled()
                    _concurrency.log.debug("cache waker connection failed: %r", exc)
                    self._ready.clear()
                    acks = 0
                    self._wake_all()  # messages may be lost meanwhile: everyone looks again
                    with contextlib.suppress(Exception):
                        await pubsub.aclose()
                    pubsub = None
                    await async_sleep(RECONNECT_BACKOFF)
                    continue
                # redis-py's read can end a cancelled wait as a timeout (no message): a
                # listener that went on would keep asyncio.run() from returning until
                # IDLE_EXIT.
                async_raise_if_cancelled()
                if message is not None:
                    if message["type"] == "subscribe":
                        acks += 1
                        self._ready.set()
                        if acks > 1:
                            self._wake_all()
                    elif message["type"] == "message":
                        self._wake(message["data"])
                with self._mutex:
                    busy = bool(self._watchers)
                if busy:
                    quiet_since = _concurrency.monotonic()
                elif message is None and self._detach_if_idle(quiet_since):
                    return
        finally:
            if pubsub is not None:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()


_registry = ScopedRegistry()


def get_cache_waker(client: AsyncClient) -> AsyncCacheWaker:
    """The cache waker for `client` in this process (or running event loop)."""
    return _registry.get(async_scope(), client, lambda: AsyncCacheWaker(client))
