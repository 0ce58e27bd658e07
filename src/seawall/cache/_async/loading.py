"""The load path of seawall.aio.Cache: one loader per key per expiry, across all processes.

In a process, concurrent callers of one key share one flight: only its leader talks to
Redis. A stale value a flight was answered stays shared a moment longer (see
_share_stale), so callers that come just after it ends make no read of their own. Across
processes, one script reads the value or takes the key's load lease; the
lease holder loads and writes back under its token, the others wait for the wake-up that
the write publishes (or for the lease to run out, when they take over). A stale value is
served at once while the lease holder refreshes it in the background.

A load runs under the namespace's generation it started in, from its fetch to its
write-back: a clear() meanwhile leaves its value in the old generation, never read again.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from seawall.cache._async.base import _FETCH, _STORE, _VOID, CORRUPT, REDIS_DOWN, ms
from seawall.cache._async.generation import AsyncCacheGenerations, Call
from seawall.cache._async.waker import AsyncCacheWaker, Watch, get_cache_waker
from seawall.cache._codec import ABSENT_PAYLOAD, CACHE_WAKE_PREFIX, CacheKeys, cache_keys
from seawall.cache._freshness import xfetch_due
from seawall.cache._l1 import MISSING
from seawall.errors import CacheWaitTimeout
from seawall.shared import _concurrency, _tokens
from seawall.shared._bounded import LAST_LOOK, async_time_limit, async_until
from seawall.shared._concurrency import (
    AsyncEvent,
    async_background,
    async_call_loader,
    async_detach,
    async_giving_back,
    async_scope,
    async_sleep,
    async_spawn,
    async_stop_if_cancelled,
)

FRESH, STALE_REFRESH, STALE, MISS_LOAD, MISS_WAIT = 1, 2, 3, 4, 5


# Extra time a waiter gives a lease beyond its remaining ttl before it looks again.
LEASE_GRACE = 0.01

# A write-back sends values up to this size (bytes) with the wake-up, saving each waiting
# process a read; larger ones are read again, so a big value is not copied per waiter.
WAKE_PAYLOAD_LIMIT = 64 * 1024

# Stale answers shared after their flight (see _share_stale), per cache: the oldest go.
SHARED_STALE_MAX = 1024


class _Flight:
    """One load in this process that concurrent callers of the same key share."""

    __slots__ = ("done", "error", "kind", "value")

    def __init__(self) -> None:
        # Made by the first caller who waits (under the cache's mutex): a hit nobody
        # shares, the usual case, pays for no event.
        self.done: AsyncEvent | None = None
        self.value: Any = None
        self.error: BaseException | None = None
        # What the callers who shared it count in stats(): a value from Redis, a stale
        # one, or a wait for a load.
        self.kind = "waits"


class AsyncCacheCore(AsyncCacheGenerations):
    """The load path shared by the public methods of seawall.aio.Cache."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._flights: dict[tuple[object, str], _Flight] = {}
        self._refreshing: set[str] = set()
        self._cached_waker: tuple[object, AsyncCacheWaker] | None = None
        # Refreshes a flight's leader starts after answering (see _refresh_soon).
        self._deferred: dict[tuple[object, str], Callable[[], Any]] = {}
        # Whether a flight's leader reads plainly (MGET) before the fetch script: not after
        # a read that found nothing fresh, until the script finds a value fresh again. A
        # miss or stale value in a run of them then costs one round trip, not two; a hit
        # mistaken for one costs a script call instead of an MGET, never a round trip more.
        self._plain_first = True
        # (scope, key) -> (until, L1 epoch, value): stale answers still shared (_share_stale).
        self._shared_stale: OrderedDict[tuple[object, str], tuple[float, int, Any]] = OrderedDict()

    # --- one flight per key in this process ----------------------------------------------

    async def _load_shared(self, key: str, loader: Callable[[], Any], ttl: float | None) -> Any:
        # Flights are per event loop too: an asyncio event belongs to one loop.
        slot = (async_scope(), key)
        shared = self._shared_stale.get(slot)
        if (
            shared is not None
            and shared[1] == self.l1.epoch
            and _concurrency.monotonic() < shared[0]
        ):
            self._counters.add("stale_served")
            return shared[2]
        while True:
            with self._mutex:
                flight = self._flights.get(slot)
                leader = flight is None
                if flight is None:
                    flight = self._flights[slot] = _Flight()
                    done = None
                else:
                    done = flight.done
                    if done is None:
                        done = flight.done = AsyncEvent()
            if leader:
                try:
                    flight.value, flight.kind = await self._resolve(key, loader, ttl)
                except BaseException as exc:
                    flight.error = exc
                    raise
                finally:
                    with self._mutex:
                        del self._flights[slot]
                        done = flight.done
                        refresh = self._deferred.pop(slot, None)
                    if done is not None:
                        done.set()
                    if refresh is not None:
                        async_detach(refresh, f"seawall-cache-refresh {key!r}")
                return flight.value
            assert done is not None
            if not await done.wait(self.wait_timeout):
                self._counters.add("waits")
                raise self._wait_timeout(key)
            if flight.error is None:
                self._counters.add(flight.kind)
                return flight.value
            if isinstance(flight.error, Exception):
                raise flight.error
            # The leader was cancelled or interrupted, not failed: try again, maybe leading.

    def _wait_timeout(self, key: str) -> CacheWaitTimeout:
        return CacheWaitTimeout(
            f"cache {self.namespace!r}: key {key!r} was being loaded by another caller for "
            f"more than wait_timeout={self.wait_timeout} s; the loader may be stuck, or "
            "raise wait_timeout (and lease) for slow loaders",
            key=key,
        )

    # --- Redis: read, or take the lease, or wait ------------------------------------------

    def _waker(self) -> AsyncCacheWaker:
        """This process's (or loop's) cache waker, remembered here: a hit asks for it."""
        here = async_scope()
        cached = self._cached_waker
        if cached is None or cached[0] is not here:
            cached = self._cached_waker = (here, get_cache_waker(self._client))
        return cached[1]

    async def _fetch(self, keys: CacheKeys, token: str, waiter: str, early: bool) -> Any:
        return await async_giving_back(
            self._redis(_FETCH, keys.all, (token, ms(self.lease), waiter, "1" if early else "")),
            functools.partial(self._give_back, keys, token),
            "giving back a cache load lease",
        )

    async def _fetch_within(
        self,
        keys: CacheKeys,
        key: str,
        token: str,
        queued: bool,
        waker: AsyncCacheWaker,
        deadline: float,
    ) -> Any:
        """`_fetch`, bounded by `deadline` (see `last_look`): CacheWaitTimeout when no
        reply came by then."""
        bound = max(deadline, _concurrency.monotonic() + LAST_LOOK)
        try:
            async with async_until(bound):
                return await self._fetch(keys, token, waker.id if queued else "", False)
        except TimeoutError as exc:
            if _concurrency.monotonic() < bound:
                raise  # not ours: a breaker's own call timeout
            # The fetch may yet run and take the load lease under our token: give it back.
            async_spawn(
                functools.partial(self._give_back_within, keys, token),
                f"giving back the load lease of cache key {key!r}",
                cleanup=True,  # the caller's CacheWaitTimeout reports the outage
            )
            raise self._wait_timeout(key) from exc

    async def _give_back_within(self, keys: CacheKeys, token: str) -> None:
        async with async_time_limit(self.lease):
            await self._give_back(keys, token)

    async def _resolve(
        self, key: str, loader: Callable[[], Any], ttl: float | None
    ) -> tuple[Any, str]:
        """The value, and what callers sharing this flight count in stats()."""
        if self._plain_first:
            found = await self._hit(key)
            if found is not MISSING:
                return found, "l2_hits" if found is not None else "absent_hits"
            self._plain_first = False
        epoch = self._fill_epoch()  # before the generation: see _new_generation
        keys = self._known_keys(key) or await self._read_keys(key)
        waker = self._waker()
        watch = waker.watch(keys.value) if waker.ready else None
        deadline = _concurrency.monotonic() + self.wait_timeout
        waited = False
        try:
            while True:
                token = _tokens.token_hex()
                sent = _concurrency.monotonic()
                if watch is not None:
                    watch.reset()  # before the fetch: a wake-up during it stays set
                # Queued only while the channel is listened to (the listener may have
                # stopped, idle, since the last look).
                queued = watch is not None and waker.ready
                if waited:
                    # A look after a wait ends by the wait's deadline, frozen server or not.
                    reply = await self._fetch_within(keys, key, token, queued, waker, deadline)
                else:
                    reply = await self._fetch(keys, token, waker.id if queued else "", False)
                status = int(reply[0])
                if status == MISS_LOAD:
                    self._counters.add("misses")
                    if not await self._bloom_admits(key):
                        self._counters.add("bloom_rejects")
                        await self._store(keys, key, token, None, ABSENT_PAYLOAD, 0.0, ttl, epoch)
                        return None, "absent_hits"
                    value = await self._load_and_store(keys, key, loader, ttl, token, epoch)
                    return value, "waits"
                if status != MISS_WAIT:
                    found = await self._found(keys, key, loader, ttl, reply, token, epoch)
                    if found[1] == "stale_served":
                        self._share_stale(key, found[0], reply, sent, epoch)
                    return found
                if not waited:
                    waited = True
                    self._counters.add("waits")
                remaining = deadline - _concurrency.monotonic()
                if remaining <= 0:
                    raise self._wait_timeout(key)
                lease_left = max(int(reply[1]), 0) / 1000 + LEASE_GRACE
                watch = await self._wait(waker, keys, watch, min(lease_left, remaining))
                found = self._landed(watch, reply, key, epoch)
                if found is not None:
                    return found
        finally:
            if watch is not None:
                waker.unwatch(keys.value, watch)

    def _landed(
        self, watch: Watch | None, reply: Any, key: str, epoch: int | None
    ) -> tuple[Any, str] | None:
        """The value the wake-up carried, if it was written under the lease we waited on.

        That write-back came after our fetch saw the lease (a delete voids the lease
        first, so it cannot be an older value), so it is as good as reading it again.
        """
        landed = None if watch is None else watch.landed
        if landed is None or len(reply) < 3 or not reply[2]:
            return None
        lease = reply[2].encode() if isinstance(reply[2], str) else bytes(reply[2])
        if landed[0] != lease:
            return None
        value = self._decode(landed[2], key)
        if value is CORRUPT:
            return None  # read it again: _found knows how to replace it
        kind = "l2_hits" if value is not None else "absent_hits"
        self._counters.add(kind)
        self._remember(key, value, landed[1] / 1000, epoch)
        return value, kind

    async def _wait(
        self, waker: AsyncCacheWaker, keys: CacheKeys, watch: Watch | None, bound: float
    ) -> Watch | None:
        """Wait for a wake-up (at most `bound` s); returns the watch to wait on next time."""
        # redis-py's asyncio client may swallow a cancellation that lands while it reads a
        # reply (the fetch that said "wait"): a cancelled caller must not wait on for up to
        # the lease.
        async_stop_if_cancelled()
        if watch is not None and waker.ready:
            await watch.event.wait(bound)
            return watch
        # Not listening (yet, or any more): subscribe, then look again queued (a value
        # landing before the subscription would otherwise wake nobody here).
        if await waker.start(min(bound, 1.0)):
            return watch if watch is not None else waker.watch(keys.value)
        await async_sleep(bound)  # pub/sub unavailable: the lease's end still bounds this
        return watch

    async def _found(
        self,
        keys: CacheKeys,
        key: str,
        loader: Callable[[], Any],
        ttl: float | None,
        reply: Any,
        token: str,
        epoch: int | None,
    ) -> tuple[Any, str]:
        status = int(reply[0])
        value = self._decode(reply[1], key)
        if value is CORRUPT:
            if status == STALE_REFRESH:
                return await self._load_and_store(keys, key, loader, ttl, token, epoch), "waits"
            return await self._replace_corrupt(keys, key, loader, ttl, epoch), "waits"
        fresh = int(reply[2]) / 1000
        if status == FRESH:
            self._plain_first = True
            kind = "l2_hits" if value is not None else "absent_hits"
            self._counters.add(kind)
            self._remember(key, value, fresh, epoch)
            beta = self.xfetch_beta
            if beta is not None and xfetch_due(fresh, int(reply[3]) / 1000, beta):
                self._refresh_soon(keys, key, loader, ttl, None)
            return value, kind
        self._counters.add("stale_served")
        if status == STALE_REFRESH:
            self._refresh_soon(keys, key, loader, ttl, token)
        return value, "stale_served"

    def _share_stale(
        self, key: str, value: Any, reply: Any, sent: float, epoch: int | None
    ) -> None:
        """Answer this process's next callers of `key` with the stale `value` too, for a
        moment: the callers that arrive just after a flight make no read of their own.

        As an L1 entry is, it is kept at most the L1's lifetime, never past the value's
        real expiry (measured from before the fetch was sent), and only while nothing is
        invalidated in the L1 (the L1's epoch: `delete`, `set`, `clear`, and the
        invalidation the refresh's write-back publishes); our own refresh, once written,
        is held in the L1, which is read first.
        """
        if epoch is None or len(reply) < 5:
            return
        lifetime = min(self.l1.ttl, int(reply[4]) / 1000)
        if lifetime <= 0:
            return
        slot = (async_scope(), key)
        now = _concurrency.monotonic()
        with self._mutex:
            shared = self._shared_stale
            shared[slot] = (sent + lifetime, epoch, value)
            shared.move_to_end(slot)
            while shared and (
                len(shared) > SHARED_STALE_MAX or next(iter(shared.values()))[0] <= now
            ):
                shared.popitem(last=False)

    async def _replace_corrupt(
        self,
        keys: CacheKeys,
        key: str,
        loader: Callable[[], Any],
        ttl: float | None,
        epoch: int | None,
    ) -> Any:
        token = _tokens.token_hex()
        reply = await self._fetch(keys, token, "", True)
        if int(reply[0]) in (STALE_REFRESH, MISS_LOAD):
            return await self._load_and_store(keys, key, loader, ttl, token, epoch)
        # Another caller is replacing it already: answer from the loader, write nothing.
        value = self._encoded(await async_call_loader(loader), key)[0]
        self._counters.add("loads")
        return value

    # --- loading and writing back ---------------------------------------------------------

    async def _bloom_admits(self, key: str) -> bool:
        """False when the Bloom filter says `key` surely does not exist."""
        if self.bloom is None:
            return True
        try:
            admits = bool(await async_call_loader(functools.partial(self.bloom.might_contain, key)))
        except Exception as exc:  # the filter only saves loads: without it, load
            self._bloom_failed(exc, "calling the loader, nothing is cached as absent on its word")
            return True
        self._bloom_warned = False
        return admits

    async def _load_and_store(
        self,
        keys: CacheKeys,
        key: str,
        loader: Callable[[], Any],
        ttl: float | None,
        token: str,
        epoch: int | None,
        *,
        give_back: bool = True,
        announce: bool = False,
    ) -> Any:
        started = _concurrency.monotonic()
        try:
            # The fetch that elected us may have swallowed the caller's cancellation (see
            # _wait): then the loader is not called, and the lease is given back below.
            async_stop_if_cancelled()
            value, payload = self._encoded(await async_call_loader(loader), key)
        except BaseException:
            self._counters.add("load_errors")
            if give_back:
                # At once, so a waiter loads now rather than at the lease's end; in the
                # background, so a cancelled caller still does it.
                async_background(
                    functools.partial(self._give_back, keys, token),
                    f"giving back the load lease of cache key {key!r}",
                )
            raise
        self._counters.add("loads")
        took = _concurrency.monotonic() - started
        self._counters.load_took(took)
        try:
            await self._store(keys, key, token, value, payload, took, ttl, epoch, announce=announce)
        except REDIS_DOWN:
            if self.breaker is None:
                raise
            # Redis went away during the load: the caller still gets what it paid for.
            _concurrency.log.info(
                "cache %r: key %r loaded but not written back: Redis unreachable",
                self.namespace,
                key,
            )
        return value

    async def _store(
        self,
        keys: CacheKeys | None,
        key: str,
        token: str,
        value: Any,
        payload: bytes,
        took: float,
        ttl: float | None,
        epoch: int | None,
        *,
        version: str | None = None,
        announce: bool = False,
    ) -> bool:
        """Write back under the lease `token` into `keys`, the generation the load began
        in; or, with `keys` None and `token` "", an explicit set, which publishes, may carry
        a `version`, and writes under the namespace's current generation. True if written.

        A write-back under a lease publishes nothing, as a load fills what no process holds
        in memory; but with `announce` (a refresh: processes may hold the old value,
        shared stale or in an L1) it publishes the invalidation an explicit set does."""
        fresh, stale = self._entry_ttls(value, ttl)
        channel, message = self._invalidation(key) if not token or announce else ("", "")
        args = [
            token,
            payload,
            ms(fresh + stale),
            ms(stale) if stale else 0,
            ms(took) if took else 0,
            CACHE_WAKE_PREFIX,
            channel,
            message,
            WAKE_PAYLOAD_LIMIT,
            self._lead(took),
        ]
        if keys is not None:
            written = await self._redis(_STORE, keys.all, args)
        else:

            def calls_at(generation: int) -> list[Call]:
                entry = cache_keys(self.namespace, key, generation)
                if version is None:
                    return [(_STORE, entry.all, args)]
                return [(_STORE, (*entry.all, entry.version), [*args, version])]

            (written,) = await self._at_current(
                calls_at, guarded=True, versioned=version is not None
            )
        if int(written) and (not token or announce):
            # An explicit set or an announced refresh: see L1.replace. A read of this
            # process that began before it can neither keep nor share the old value.
            self.l1.replace([(key, value, fresh)], epoch)
            if announce:
                self._dropped_here(key)  # set() does it itself
        elif int(written):
            self._remember(key, value, fresh, epoch)
        elif token:
            self._voided(key)
        else:  # a versioned set older than what is stored: our L1 must not keep it either
            self.l1.discard(key)
        return bool(int(written))

    def _voided(self, key: str) -> None:
        """A load of `key` was not written back: its lease was voided or taken over."""
        self._counters.add("voided")
        _concurrency.log.info(
            "cache %r: the load of key %r was not written back: a delete or set "
            "came while it ran (or its lease of %s s ran out)",
            self.namespace,
            key,
            self.lease,
        )

    async def _give_back(self, keys: CacheKeys, token: str) -> None:
        await self._redis(_VOID, keys.all, (token, CACHE_WAKE_PREFIX, "", ""))

    def _refresh_soon(
        self,
        keys: CacheKeys,
        key: str,
        loader: Callable[[], Any],
        ttl: float | None,
        token: str | None,
    ) -> None:
        """Refresh `key` in the background; with `token`, under that lease (already taken)."""
        with self._mutex:
            if token is None and key in self._refreshing:
                return
            self._refreshing.add(key)
        self._counters.add("refreshes")
        # Started by the flight's leader once its callers have their (stale) value: in
        # the sync world starting a thread waits for it to run, which they need not.
        refresh = functools.partial(self._refresh, keys, key, loader, ttl, token)
        with self._mutex:
            self._deferred[(async_scope(), key)] = refresh

    async def _refresh(
        self,
        keys: CacheKeys,
        key: str,
        loader: Callable[[], Any],
        ttl: float | None,
        token: str | None,
    ) -> None:
        try:
            epoch = self._fill_epoch()
            if token is None:
                token = _tokens.token_hex()
                reply = await self._fetch(keys, token, "", True)
                if int(reply[0]) not in (STALE_REFRESH, MISS_LOAD):
                    return  # another process refreshes it
            try:
                # A failed refresh keeps its lease until it runs out: nobody waits for
                # it (the stale value is served), and the lease paces the retries, so a
                # failing database is not hit again on every read.
                await self._load_and_store(
                    keys, key, loader, ttl, token, epoch, give_back=False, announce=True
                )
            except Exception as exc:
                _concurrency.log.warning(
                    "cache %r: refreshing key %r failed (%r); the old value is "
                    "served until it expires or a later refresh (after the lease) succeeds",
                    self.namespace,
                    key,
                    exc,
                )
        finally:
            with self._mutex:
                self._refreshing.discard(key)
