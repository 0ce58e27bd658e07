"""The Redis side of seawall.django.RedisCache: one round trip per call, Django's format.

Keys arrive made and validated (KEY_PREFIX, VERSION, KEY_FUNCTION), timeouts resolved to
seconds (None: for ever, 0: gone at once). Values are stored as Django's own RedisCache
stores them (see seawall.django._serializer), so both backends read the same entries.

get_or_load is get_or_set with a callable, made one call across all processes: the
first caller that misses takes the key's load lease and runs the callable; the others
queue in the same script and wait for the wake-up its write-back publishes (seawall.Cache's
per-process channel), bounded by the lease's remaining time, after which one of them
takes over. A delete voids the lease, so a load that read the database before the
delete cannot write its older value after it.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import redis.asyncio.cluster

from seawall.cache._async.waker import get_cache_waker
from seawall.cache._codec import CACHE_WAKE_PREFIX
from seawall.django._keys import STALE, flight_keys, stale_key
from seawall.django.errors import NotAnInteger
from seawall.errors import CacheWaitTimeout
from seawall.shared import _concurrency, _scripts, _tokens
from seawall.shared._async.scripts import run_script
from seawall.shared._concurrency import (
    AsyncEvent,
    async_call_loader,
    async_giving_back,
    async_scope,
    async_stop_if_cancelled,
)
from seawall.shared._validate import AsyncClient

_LOAD = _scripts.load("seawall.django", "django_load")
_LOADED = _scripts.load("seawall.django", "django_loaded")
_INCR = _scripts.load("seawall.django", "django_incr")

# How long a caller waits for the wake-up listener to subscribe before queueing without it
# (then it looks again when the lease runs out, instead of being woken).
LISTENER_START = 0.5
# Extra time a waiter gives a lease beyond its remaining ttl before it looks again.
LEASE_GRACE = 0.01
# Keys deleted per UNLINK by clear().
CLEAR_BATCH = 500

# (event loop or process, client, lease key) -> (wake-up event, end of the wait): the wait
# of a begin_load() caller of this process for another's lease, which the callers of the
# same key that come meanwhile share instead of each running the lease script (a page
# that 50 requests of one process miss together then costs one script, not 50).
_waits: dict[tuple[object, int, str], tuple[AsyncEvent, float]] = {}


def px(timeout: float) -> int:
    """A positive timeout in whole milliseconds (at least 1: PX 0 is an error)."""
    return max(1, math.ceil(timeout * 1000))


def wake_message(lease: str) -> str:
    """What the write-back publishes: the lease's name, which the waiters watch."""
    return f"{len(lease)}:{lease}"


def glob_escape(text: str) -> str:
    """`text` matched literally by a SCAN pattern."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def _versioned(name: Any, prefix: str) -> bool:
    """Whether key `name` (bytes) is `prefix`, a version number, ":" and a key."""
    text = name.decode("utf-8", "replace") if isinstance(name, bytes) else str(name)
    version, colon, _ = text[len(prefix) :].partition(":")
    return bool(colon) and version.isdigit()


class AsyncRedisStore:
    """Django's cache operations on one redis-py client (a server or a Cluster)."""

    def __init__(
        self,
        client: AsyncClient,
        serializer: Any,
        *,
        lease: float,
        wait_timeout: float,
        stale_ttl: float | None = None,
    ) -> None:
        self.client = client
        self.serializer = serializer
        self.lease_ms = px(lease)
        self.wait_timeout = wait_timeout
        # OPTIONS stale_ttl: get_or_set's write-back leaves a stale copy beside the value,
        # living this much longer, which waiters get while the next load runs; every
        # other write drops it (see _stale).
        self.stale_ms = None if not stale_ttl else px(stale_ttl)
        self.cluster = isinstance(client, redis.asyncio.cluster.RedisCluster)

    def _stale(self, key: str) -> list[str]:
        """The key's stale copy, to drop with any write (none without stale_ttl): a
        waiter must never get a value older than the last write."""
        return [] if self.stale_ms is None else [stale_key(key)]

    # --- values ---------------------------------------------------------------------

    def _loads(self, raw: Any) -> Any:
        return self.serializer.loads(raw)

    async def get(self, key: str, default: Any) -> Any:
        raw = await self.client.get(key)
        return default if raw is None else self._loads(raw)

    async def get_with_pttl(self, key: str) -> tuple[bytes | None, int]:
        """The raw value and its PTTL (-1: no expiry, -2: missing), in one round trip:
        what the L1 is filled with."""
        pipe = self.client.pipeline(transaction=False)
        pipe.get(key)
        pipe.pttl(key)
        raw, pttl = await pipe.execute()
        return raw, int(pttl)

    async def publish(self, message: tuple[str, str] | None) -> None:
        """PUBLISH (channel, body), an invalidation of the L1s of other processes."""
        if message is not None:
            await self.client.publish(*message)

    async def get_many(self, keys: list[str]) -> dict[str, Any]:
        if not keys:
            return {}
        if self.cluster:
            client: Any = self.client
            replies = await client.mget_nonatomic(keys)
        else:
            replies = await self.client.mget(keys)
        return {
            key: self._loads(raw) for key, raw in zip(keys, replies, strict=True) if raw is not None
        }

    async def has_key(self, key: str) -> bool:
        return bool(await self.client.exists(key))

    async def set(self, key: str, value: Any, timeout: float | None) -> None:
        payload = self.serializer.dumps(value)
        stale = self._stale(key)
        if timeout == 0:
            await self.client.delete(key, *stale)
        elif stale:
            pipe = self.client.pipeline(transaction=False)
            pipe.set(key, payload, px=None if timeout is None else px(timeout))
            pipe.delete(*stale)
            await pipe.execute()
        elif timeout is None:
            await self.client.set(key, payload)
        else:
            await self.client.set(key, payload, px=px(timeout))

    async def add(self, key: str, value: Any, timeout: float | None) -> bool:
        payload = self.serializer.dumps(value)
        if timeout == 0:
            # Stored and gone at once: the answer is only whether it would have been.
            return not await self.client.exists(key)
        stale = self._stale(key)
        if stale:
            pipe = self.client.pipeline(transaction=False)
            pipe.set(key, payload, nx=True, px=None if timeout is None else px(timeout))
            pipe.delete(*stale)  # if nothing was added, only a copy of the value in place
            return bool((await pipe.execute())[0])
        if timeout is None:
            return bool(await self.client.set(key, payload, nx=True))
        return bool(await self.client.set(key, payload, nx=True, px=px(timeout)))

    async def set_many(self, data: Mapping[str, Any], timeout: float | None) -> None:
        payloads = {key: self.serializer.dumps(value) for key, value in data.items()}
        if timeout == 0:
            await self.delete_many(list(payloads))
            return
        # One SET per key, each with its expiry: MSET then EXPIRE would leave keys
        # without one if the connection broke between them.
        pipe = self.client.pipeline(transaction=False)
        for key, payload in payloads.items():
            if timeout is None:
                pipe.set(key, payload)
            else:
                pipe.set(key, payload, px=px(timeout))
            for stale in self._stale(key):
                pipe.delete(stale)
        await pipe.execute()

    async def touch(self, key: str, timeout: float | None) -> bool:
        if timeout is None:
            # PERSIST answers 0 for a key without expiry too: EXISTS tells them apart.
            pipe = self.client.pipeline(transaction=False)
            pipe.persist(key)
            pipe.exists(key)
            return bool((await pipe.execute())[1])
        if timeout == 0:
            pipe = self.client.pipeline(transaction=False)
            pipe.delete(key)
            for stale in self._stale(key):
                pipe.delete(stale)
            return bool((await pipe.execute())[0])
        return bool(await self.client.pexpire(key, px(timeout)))

    async def delete(self, key: str) -> bool:
        # The lease goes too: a load in flight then cannot write back a value it read
        # before this delete (see django_loaded.lua).
        value, lease, _ = flight_keys(key)
        pipe = self.client.pipeline(transaction=False)
        pipe.delete(value)
        pipe.delete(lease, *self._stale(key))
        return bool((await pipe.execute())[0])

    async def delete_many(self, keys: Iterable[str]) -> None:
        names = []
        for key in keys:
            value, lease, _ = flight_keys(key)
            names += [value, lease, *self._stale(key)]
        if names:
            await self.client.delete(*names)

    async def incr(self, key: str, delta: int) -> int:
        reply = await run_script(self.client, _INCR, [key, *self._stale(key)], [delta])
        code = int(reply[0])
        if code == 0:
            raise ValueError(f"Key '{key}' not found.")
        if code == -1:
            raise NotAnInteger(
                f"incr/decr of cache key {key!r}: its value is not an integer; store the "
                "counter with set(key, int) first (only ints are stored as digits)",
                key=key,
            )
        return int(reply[1])

    async def clear(self, prefix: str | None, versioned: bool = False) -> None:
        """Delete every key starting with `prefix` (SCAN, UNLINK by batches), or with None
        every key of the database (FLUSHDB, as Django's RedisCache always does).

        `versioned`: only keys Django's default KEY_FUNCTION makes, `prefix` then a
        version number and ":", so that clearing the cache of KEY_PREFIX "site" leaves
        the cache of KEY_PREFIX "site:admin" alone, and one of KEY_PREFIX "seawall"
        leaves seawall's own keys (sessions, schedules) alone."""
        if prefix is None:
            await self.client.flushdb()
            return
        if versioned:
            await self._unlink_matching(
                glob_escape(prefix) + "[0-9]*", lambda name: _versioned(name, prefix)
            )
        else:
            await self._unlink_matching(glob_escape(prefix) + "*")
        if self.stale_ms is not None:
            # Stale copies are named by the hash tag before the key: those of every
            # cache of this database go (each only spares its waiters a wait).
            await self._unlink_matching(glob_escape(STALE) + "*")

    async def _unlink_matching(
        self, pattern: str, keep: Callable[[Any], bool] | None = None
    ) -> None:
        batch: list[Any] = []
        async for name in self.client.scan_iter(match=pattern, count=1000):
            if keep is not None and not keep(name):
                continue
            batch.append(name)
            if len(batch) >= CLEAR_BATCH:
                await self.client.unlink(*batch)
                batch = []
        if batch:
            await self.client.unlink(*batch)

    # --- get_or_set with a callable: one call across all processes -----------------------

    async def get_or_load(self, key: str, loader: Callable[[], Any], timeout: float | None) -> Any:
        raw = await self.client.get(key)
        if raw is not None:
            return self._loads(raw)
        keys = flight_keys(key)
        lease = keys[1]
        stale = self._stale(key)
        token = _tokens.token_hex()
        waker = get_cache_waker(self.client)
        deadline = _concurrency.monotonic() + self.wait_timeout
        while True:
            listening = waker.ready or await waker.start(LISTENER_START)
            # Watched before the script queues this process: a wake-up published right
            # after it is not missed.
            watch = waker.watch(lease)
            try:
                reply = await self._lease_script(
                    key, token, [*keys, *stale], waker.id if listening else ""
                )
                code = int(reply[0])
                if code in (1, 4):  # the value, or the stale copy while another loads
                    return self._loads(reply[1])
                if code == 2:
                    return await self._load(keys, token, loader, timeout)
                left = deadline - _concurrency.monotonic()
                if left <= 0:
                    raise CacheWaitTimeout(
                        f"get_or_set of cache key {key!r}: another process has been loading "
                        f"it for over wait_timeout={self.wait_timeout} s; raise OPTIONS "
                        "['wait_timeout'] (and 'lease') if the callable is that slow",
                        key=key,
                    )
                lease_left = max(int(reply[1]), 0) / 1000
                # The script's read may have swallowed the caller's cancellation (redis-py's
                # asyncio client can): a cancelled caller does not wait on.
                async_stop_if_cancelled()
                await watch.event.wait(min(left, lease_left + LEASE_GRACE))
            finally:
                waker.unwatch(lease, watch)

    # --- a load lease for values stored by other means (the cache middleware's pages) ----

    async def begin_load(self, key: str) -> str | None:
        """Take `key`'s load lease, or wait for the caller holding it.

        Returns the lease's token when this caller took it: it must store the value
        (set()) and then call end_load(), which wakes the waiters. Returns None when the
        value is there, or after waiting for another caller's load to end (its value
        stored, or not: a response that could not be cached), for its lease to run out, or
        for wait_timeout: the caller looks again and, still missing, makes the value
        itself without a lease (waiters never queue for a lease one by one)."""
        keys = flight_keys(key)
        lease = keys[1]
        slot = (async_scope(), id(self.client), lease)
        shared = _waits.get(slot)
        if shared is not None:
            # Another caller here waits for this lease already: its wake-up is ours.
            event, until = shared
            left = until - _concurrency.monotonic()
            if left > 0:
                await event.wait(left)
                return None
        token = _tokens.token_hex()
        waker = get_cache_waker(self.client)
        listening = waker.ready or await waker.start(LISTENER_START)
        watch = waker.watch(lease)
        try:
            reply = await self._lease_script(key, token, list(keys), waker.id if listening else "")
            code = int(reply[0])
            if code == 2:
                return token
            if code == 3:
                lease_left = max(int(reply[1]), 0) / 1000
                bound = min(self.wait_timeout, lease_left + LEASE_GRACE)
                mine = (watch.event, _concurrency.monotonic() + bound)
                async_stop_if_cancelled()  # as get_or_set's wait
                shared = _waits.setdefault(slot, mine)
                try:
                    await watch.event.wait(bound)
                finally:
                    if shared is mine:
                        del _waits[slot]
            return None
        finally:
            waker.unwatch(lease, watch)

    async def _lease_script(self, key: str, token: str, keys: list[str], waiter: str) -> Any:
        """The lease script: the value, or the lease taken under `token`, or a wait."""
        return await async_giving_back(
            run_script(self.client, _LOAD, keys, [token, self.lease_ms, waiter]),
            functools.partial(self.end_load, key, token),
            "giving back a cache lease",
        )

    async def end_load(self, key: str, token: str) -> None:
        """Give back the lease begin_load() took and wake the callers waiting for it
        (nothing happens if the lease ran out or a delete voided it meanwhile)."""
        keys = flight_keys(key)
        message = wake_message(keys[1])
        await run_script(
            self.client, _LOADED, keys, [token, "0", "", "", CACHE_WAKE_PREFIX, message]
        )

    async def _load(
        self,
        keys: tuple[str, str, str],
        token: str,
        loader: Callable[[], Any],
        timeout: float | None,
    ) -> Any:
        """Run the callable under the lease, store what it returns, wake the waiters."""
        message = wake_message(keys[1])
        try:
            async_stop_if_cancelled()  # a cancelled caller's callable is not run; lease back
            value = await async_call_loader(loader)
            payload = self.serializer.dumps(value)
        except BaseException:
            # The lease goes back and the waiters look again: the next one loads.
            with contextlib.suppress(Exception):
                await run_script(
                    self.client, _LOADED, keys, [token, "0", "", "", CACHE_WAKE_PREFIX, message]
                )
            raise
        store = "0" if timeout == 0 else "1"
        ttl = "" if timeout is None or timeout == 0 else px(timeout)
        names, args = list(keys), [token, store, payload, ttl, CACHE_WAKE_PREFIX, message]
        if self.stale_ms is not None and ttl != "":
            # A value kept for ever never leaves a gap for a stale copy to fill.
            names.append(stale_key(keys[0]))
            args.append(int(ttl) + self.stale_ms)
        await run_script(self.client, _LOADED, names, args)
        return value
