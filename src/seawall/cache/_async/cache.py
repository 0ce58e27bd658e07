"""seawall.aio.Cache: a two-level cache (process memory, then Redis) that never stampedes."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from seawall.cache._async.base import _FETCH, _VOID, CORRUPT, REDIS_DOWN, ms
from seawall.cache._async.cached_function import AsyncCachedFunction, P
from seawall.cache._async.generation import Call
from seawall.cache._async.tags import AsyncCacheTags
from seawall.cache._async.writes import BATCH
from seawall.cache._breaker import CircuitBreaker, RateLimiter
from seawall.cache._codec import (
    CACHE_WAKE_PREFIX,
    cache_keys,
    check_serializer_fits_client,
    make_serializer,
)
from seawall.cache._freshness import DEFAULT_JITTER
from seawall.cache._hotkeys import HotKeys
from seawall.cache._l1 import L1, MISSING, HotL1
from seawall.cache._stats import CacheStats
from seawall.errors import BloomFilterError, CacheUnavailable
from seawall.shared._concurrency import async_call_loader
from seawall.shared._validate import (
    AsyncClient,
    check_async_client,
    check_name,
    check_seconds,
    check_timeout,
    decodes_responses,
)

T = TypeVar("T")


# One read in this many is counted by the hot-key sketch: a few percent of an L1 hit.
HOT_SAMPLE_EVERY = 16


class AsyncCache(AsyncCacheTags):
    """Cache-aside with an in-process L1 and Redis as L2, shared by many processes.

    - Breakdown: concurrent misses of one key, in all processes together, make one loader
      call; the other callers are woken when the value lands.
    - Stale-while-revalidate: for `stale_ttl` seconds after `ttl`, callers get the old
      value at once while one background refresh runs (elected across processes).
    - Penetration: a loader returning None is cached as "absent" for `absent_ttl`.
    - Avalanche: every ttl is jittered by +-`jitter` (a fraction, 10% by default).
    - Stale sets: `delete` voids a load in flight, which then cannot write back.
    - Redis down (with `breaker=`): no waiting on a dead server; a recent L1 copy is
      served, else the loader runs as often as `loader_limit` allows.
    """

    def __init__(
        self,
        client: AsyncClient,
        namespace: str,
        ttl: float = 300.0,
        *,
        stale_ttl: float | None = None,
        absent_ttl: float = 30.0,
        jitter: float = DEFAULT_JITTER,
        lease: float = 10.0,
        wait_timeout: float | None = None,
        l1_size: int = 10_000,
        l1_ttl: float | None = None,
        xfetch_beta: float | None = None,
        serializer: Any = "json",
        compress_over: int | None = None,
        bloom: Any = None,
        breaker: CircuitBreaker | None = None,
        loader_limit: RateLimiter | None = None,
        hot_keys: int = 256,
    ) -> None:
        checked = check_async_client(client, "Cache")
        name = check_name(namespace, "Cache")
        if breaker is not None and not isinstance(breaker, CircuitBreaker):
            raise TypeError(
                f"breaker of cache {name!r} must be a seawall.CircuitBreaker (e.g. "
                f"breaker=seawall.CircuitBreaker()) or None, got {breaker!r}"
            )
        if loader_limit is not None and not isinstance(loader_limit, RateLimiter):
            raise TypeError(
                f"loader_limit of cache {name!r} must be a seawall.RateLimiter (e.g. "
                f"loader_limit=seawall.RateLimiter(100)) or None, got {loader_limit!r}"
            )
        if isinstance(hot_keys, bool) or not isinstance(hot_keys, int) or hot_keys < 0:
            raise ValueError(
                f"hot_keys of cache {name!r} must be an int >= 0 (how many keys the hot-key "
                f"sketch tracks; 0 turns it off), got {hot_keys!r}"
            )
        if breaker is not None and breaker.name is None:
            breaker.name = f"of cache {name!r}"  # named in its WARNING lines
        hot = HotKeys(hot_keys, sample_every=HOT_SAMPLE_EVERY) if hot_keys else None
        ttl = check_seconds(ttl, f"ttl of cache {name!r}")
        if stale_ttl is None:
            stale_ttl = ttl
        elif stale_ttl != 0:
            stale_ttl = check_seconds(stale_ttl, f"stale_ttl of cache {name!r}")
        if isinstance(jitter, bool) or not isinstance(jitter, int | float) or not 0 <= jitter < 1:
            raise ValueError(
                f"jitter of cache {name!r} must be a fraction in [0, 1), got {jitter!r}"
            )
        lease = check_seconds(lease, f"lease of cache {name!r}")
        waits = check_timeout(wait_timeout, f"wait_timeout of cache {name!r}")
        if xfetch_beta is not None:
            xfetch_beta = check_seconds(xfetch_beta, f"xfetch_beta of cache {name!r}")
        l1_lifetime = min(5.0, ttl / 10) if l1_ttl is None else l1_ttl
        l1_lifetime = check_seconds(l1_lifetime, f"l1_ttl of cache {name!r}")
        if bloom is not None and not (
            callable(getattr(bloom, "might_contain", None))
            and callable(getattr(bloom, "add", None))
        ):
            raise TypeError(
                f"bloom of cache {name!r} must be a seawall.BloomFilter (or have might_contain() "
                f"and add()), got {type(bloom).__qualname__}"
            )
        codec = make_serializer(serializer, compress_over)
        check_serializer_fits_client(codec, decodes_responses(checked), name)
        super().__init__(
            checked,
            name,
            ttl=ttl,
            stale_ttl=float(stale_ttl),
            absent_ttl=check_seconds(absent_ttl, f"absent_ttl of cache {name!r}"),
            jitter=float(jitter),
            lease=lease,
            wait_timeout=2 * lease if waits is None else waits,
            xfetch_beta=xfetch_beta,
            serializer=codec,
            l1=(
                HotL1(hot_keys, l1_lifetime, hot.is_hot)
                if hot is not None and l1_size == 0
                else L1(l1_size, l1_lifetime)
            ),
            bloom=bloom,
            breaker=breaker,
            loader_limit=loader_limit,
            hot=hot,
        )

    def __repr__(self) -> str:
        return f"<seawall.Cache {self.namespace!r} ttl={self.ttl}s>"

    async def get_or_load(
        self,
        key: str | bytes | int,
        loader: Callable[[], T],
        ttl: float | None = None,
        *,
        tags: Iterable[str] | None = None,
    ) -> T:
        """The value of `key`; on a miss `loader()` runs once for all callers everywhere.

        `loader` returns the value, or None for "not found" (cached for absent_ttl). In
        seawall.aio it may be an async function. An exception from it reaches every
        caller waiting on that load in this process; nothing is cached. With `tags`, the
        process that loads the entry tags it (see delete_tag).
        """
        # str keys and no ttl, the usual call, skip two method calls: a tenth of an L1 hit.
        text = key if type(key) is str else self._key(key)
        entry_ttl = None if ttl is None else self._ttl(ttl)
        if not callable(loader):
            raise TypeError(f"cache {self.namespace!r}: loader must be callable, got {loader!r}")
        if tags is not None:
            loader = self._tagging_loader(self._tags(tags), text, loader, entry_ttl)
        # _peek, inlined (the L1 hit is the path a method call costs most); keep in step.
        hot = self._hot
        if hot is not None:
            hot.skip -= 1  # HotKeys.offer, inlined: most reads are not sampled
            if hot.skip <= 0 and hot.sample(text):
                self._publish_hot_keys()
        found = self.l1.get(text)
        if found is not MISSING:
            self._counters.add("l1_hits" if found is not None else "absent_hits")
            return found  # type: ignore[no-any-return]
        try:
            return await self._load_shared(text, loader, entry_ttl)  # type: ignore[no-any-return]
        except REDIS_DOWN as exc:
            if self.breaker is None:
                raise
            return await self._degraded(text, loader, exc)  # type: ignore[no-any-return]

    async def _degraded(self, key: str, loader: Callable[[], Any], cause: Exception) -> Any:
        """Redis is unreachable: a bounded-stale L1 copy, else the loader if its rate allows."""
        stale = self.l1.get_stale(key, max(self.stale_ttl, self.l1.ttl))
        if stale is not MISSING:
            self._counters.add("stale_served")
            return stale
        limit = self.loader_limit
        if limit is None or limit.try_acquire():
            value = self._encoded(await async_call_loader(loader), key)[0]
            self._counters.add("loads")
            return value
        raise CacheUnavailable(
            f"cache {self.namespace!r}: Redis is unreachable ({cause!r}), no recent copy of key "
            f"{key!r} is held here, and the loader's rate limit is used up; retry in "
            f"{limit.retry_after():.2f} s",
            key=key,
        ) from cause

    async def get(self, key: Any, default: Any = None) -> Any:
        """The cached value of `key` (a stale one too), or `default`; never loads."""
        text = self._key(key)
        found = self._peek(text)
        if found is MISSING:
            found = await self._hit(text)
        if found is not MISSING:
            return default if found is None else found
        epoch = self._fill_epoch()  # before the generation: see _new_generation
        keys = self._known_keys(text) or await self._read_keys(text)
        reply = await self._command(_FETCH, keys.all, ("", 0, "", ""))
        if int(reply[0]) == 5:
            self._counters.add("misses")
            return default
        value = self._decode(reply[1], text)
        if value is CORRUPT:
            return default
        if int(reply[0]) == 1:
            self._counters.add("l2_hits" if value is not None else "absent_hits")
            self._remember(text, value, int(reply[2]) / 1000, epoch)
        else:
            self._counters.add("stale_served")
        return default if value is None else value

    async def set(
        self,
        key: Any,
        value: Any,
        ttl: float | None = None,
        *,
        version: int | None = None,
        tags: Iterable[str] | None = None,
    ) -> bool:
        """Store `value` (None: "absent"); every process's L1 drops its copy. True if stored.

        A load of `key` in flight is voided: it cannot overwrite this value with one it
        read before. With a Bloom filter, the key is added to it.

        With `version` (an int >= 0: the row's version column, its updated_at in
        microseconds, or a change-log position), the value is stored only if `version` is
        newer than the version stored for `key`, including the tombstone of a versioned
        delete; otherwise nothing changes and the result is False. Writers racing with
        values read at different times then leave the newest in the cache whatever order
        their writes arrive in.

        `tags` (str or strs): delete_tag(tag) deletes this entry too.
        """
        text = self._key(key)
        entry_ttl = self._ttl(ttl)
        stamp = None if version is None else self._version(version, text)
        marks = self._tags(tags)
        value, payload = self._encoded(value, text)
        if marks:
            await self._tag(marks, [text], entry_ttl)
        if value is not None and self.bloom is not None:
            try:
                await async_call_loader(functools.partial(self.bloom.add, text))
            except BloomFilterError as exc:  # lost or damaged: checks let every key load
                self._bloom_failed(exc, f"key {text!r} is written but not added to it")
        epoch = self._fill_epoch()
        # Our L1 takes the value after the write (L1.replace): a read of this process
        # that began before it cannot store the old value afterwards.
        stored = await self._store(
            None, text, "", value, payload, 0.0, entry_ttl, epoch, version=stamp
        )
        self._dropped_here(text)
        return stored

    async def delete(
        self, key: Any, *, again_after: float | None = None, version: int | None = None
    ) -> bool:
        """Drop `key` from Redis and from every process's L1; a load in flight is voided.

        `again_after` (seconds): delete it once more that much later (the delayed double
        delete), to remove a value a reader loaded from a lagging replica, or from a
        database read that raced the write, after the first delete. The second delete is
        recorded in Redis before this returns: it happens even if this process dies, carried
        out by any process with a Cache of this namespace open.

        `version` (an int >= 0, see set()): leave a tombstone of that version for the
        entry's ttl, so a write of an older version can never bring the entry back. A
        versioned delete older than the stored version changes nothing and returns False.
        """
        text = self._key(key)
        stamp = None if version is None else self._version(version, text)
        delay = self._again_after(again_after)
        if delay is not None:
            await self._schedule_again([text], delay)
        if stamp is None:
            await self._drop_everywhere([text])
            return True
        self.l1.discard(text)
        channel, message = self._invalidation(text)
        tombstone = ms(self.ttl * (1 + self.jitter) + self.stale_ttl)
        args = ("", CACHE_WAKE_PREFIX, channel, message, stamp, tombstone)

        def calls_at(generation: int) -> list[Call]:
            keys = cache_keys(self.namespace, text, generation)
            return [(_VOID, (*keys.all, keys.version), args)]

        (done,) = await self._at_current(calls_at, guarded=False, versioned=True)
        self.l1.discard(text)
        self._dropped_here(text)
        return int(done) == 1

    def _version(self, version: Any, text: str) -> str:
        wanted = "an int >= 0 (a row version, an updated_at in microseconds, a log position)"
        if isinstance(version, bool) or not isinstance(version, int):
            raise TypeError(
                f"cache {self.namespace!r}: version of key {text!r} must be {wanted}, "
                f"got {version!r}"
            )
        if version < 0:
            raise ValueError(
                f"cache {self.namespace!r}: version of key {text!r} must be {wanted}, "
                f"got {version!r}"
            )
        return str(version)

    async def warm(
        self, items: Mapping[Any, Any] | Iterable[tuple[Any, Any]], ttl: float | None = None
    ) -> int:
        """Write many entries in pipelined batches, each ttl jittered; returns the count.

        Everything is encoded first: a key or value that fails raises before anything is
        written.
        """
        entry_ttl = self._ttl(ttl)
        pairs = items.items() if isinstance(items, Mapping) else items
        writes = []
        for key, value in pairs:
            text = self._key(key)
            writes.append(self._write(text, *self._encoded(value, text), entry_ttl))
        for start in range(0, len(writes), BATCH):
            # No message per key: the one below empties every other L1 of the namespace.
            await self._set_entries(writes[start : start + BATCH], publish=False, guarded=False)
        # One message for the lot: every other L1 of this namespace starts afresh.
        await self._client.publish(*self._invalidation(None))
        self._invalidator_here().clear_local(self.namespace, skip=self.l1)
        return len(writes)

    def cached(
        self,
        ttl: float | None = None,
        key: str | Callable[..., Any] | None = None,
        *,
        condition: Callable[[Any], bool] | None = None,
        tags: Iterable[str] | None = None,
    ) -> Callable[[Callable[P, T]], AsyncCachedFunction[P, T]]:
        """Decorator: cache a function's results, one entry per distinct call.

        The key is the function's qualified name and its arguments bound to its signature
        (defaults applied, `self`/`cls` left out, types kept apart; see
        seawall.cache._call_keys), or `key`: a template such as "user:{user_id}" (any
        parameter, attributes too: "{self.tenant}:{user_id}") or a function of the same
        arguments. `condition(result)` False leaves that result uncached. The decorated
        function has `invalidate`, `refresh`, `set`, `get` and `key` for its entries.
        `tags`: tags of every entry, templates like `key` ("user:{user_id}"), see
        delete_tag.
        """
        entry_ttl = self._ttl(ttl)
        marks = self._tags(tags)

        def decorate(function: Callable[P, T]) -> AsyncCachedFunction[P, T]:
            return AsyncCachedFunction(self, function, entry_ttl, key, condition, tags=marks)

        return decorate

    def stats(self) -> CacheStats:
        """Counters of this Cache object in this process (see CacheStats)."""
        return self._counters.snapshot()
