"""Many keys at once for seawall.aio.Cache: get_many, get_or_load_many, set_many.

One MGET reads every key (split per node on Cluster); the missing keys go through the
same lease election as get_or_load, in one pipelined round trip (one per node on
Cluster), and the keys this process is elected to load reach the loader in one call, and
are written back together (see writes.py). Keys another process is loading are waited
for as get_or_load waits, each one loaded alone only if that load is abandoned.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import redis.asyncio.cluster

from seawall.cache._async.base import _FETCH, REDIS_DOWN, ms, stored_payload
from seawall.cache._async.base import CORRUPT as CORRUPT_VALUE
from seawall.cache._async.generation import Call
from seawall.cache._async.loading import FRESH, MISS_LOAD, MISS_WAIT, STALE, STALE_REFRESH
from seawall.cache._async.writes import BATCH, AsyncCacheWrites
from seawall.cache._codec import ABSENT_PAYLOAD, CacheKeys, cache_keys
from seawall.cache._l1 import MISSING
from seawall.errors import BloomFilterError
from seawall.shared import _concurrency, _tokens
from seawall.shared._concurrency import (
    async_background,
    async_call_loader,
    async_giving_back,
    async_stop_if_cancelled,
)

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class AsyncCacheBulk(AsyncCacheWrites):
    """get_many, get_or_load_many and set_many of seawall.aio.Cache."""

    if TYPE_CHECKING:  # seawall.aio.Cache's, which waits for a key loaded elsewhere

        async def get_or_load(
            self,
            key: Any,
            loader: Callable[[], Any],
            ttl: float | None = None,
            *,
            tags: Iterable[str] | None = None,
        ) -> Any: ...

        def _tags(self, tags: Iterable[str] | None) -> tuple[str, ...]: ...

        async def _tag(
            self, tags: tuple[str, ...], texts: list[str], ttl: float | None
        ) -> None: ...

    async def get_many(self, keys: Iterable[K]) -> dict[K, Any]:
        """{key: cached value} for the keys that hold one (stale ones too), in one MGET
        (one per slot, pipelined per node, on Cluster); never loads. Keys cached as absent
        are left out. Entries read fresh are kept in the L1, as a get_or_load hit is."""
        wanted = {key: self._key(key) for key in keys}
        found: dict[K, Any] = {}
        rest = []
        for key, text in wanted.items():
            value = self.l1.get(text)
            if value is MISSING:
                rest.append(key)
            elif value is not None:
                self._counters.add("l1_hits")
                found[key] = value
        if not rest:
            return {key: found[key] for key in wanted if key in found}
        epoch = self._fill_epoch()  # before the generation: see _new_generation
        generation = await self._generation()
        entries = [cache_keys(self.namespace, wanted[key], generation) for key in rest]
        if epoch is None:  # no L1 to keep them in: the values alone
            stored = await self._mget([entry.value for entry in entries])
            pairs = [(raw, None) for raw in stored]
        else:
            stored = await self._mget([name for entry in entries for name in entry.read])
            pairs = list(zip(stored[::2], stored[1::2], strict=True))
        for key, (raw, lead) in zip(rest, pairs, strict=True):
            value = MISSING if lead is None else self._plain_hit(wanted[key], raw, lead, epoch)
            if value is MISSING:  # stale (its hit marker gone), missing or unreadable
                value = self._value_of(raw, wanted[key])
                if value is MISSING:
                    self._counters.add("misses")
                    continue
                if value is not None:
                    self._counters.add("l2_hits")
            if value is not None:
                found[key] = value
        return {key: found[key] for key in wanted if key in found}  # in the order asked

    async def get_or_load_many(
        self,
        keys: Iterable[K],
        loader: Callable[[list[K]], Mapping[K, V]],
        ttl: float | None = None,
        *,
        tags: Iterable[str] | None = None,
    ) -> dict[K, V | None]:
        """{key: value} for every key; `loader(missing)` gets, in one call, the keys this
        process was elected to load, and returns {key: value} (a key it leaves out, or
        maps to None, is cached as absent and answered None).

        As with get_or_load, each key is loaded once for all processes: a key another
        process is loading is waited for, not loaded again. With `tags`, the keys this
        process loads are tagged (see delete_tag).
        """
        entry_ttl = self._ttl(ttl)
        marks = self._tags(tags)
        if not callable(loader):
            raise TypeError(f"cache {self.namespace!r}: loader must be callable, got {loader!r}")
        wanted = {key: self._key(key) for key in keys}
        result: dict[K, Any] = {}
        rest = []
        for key, text in wanted.items():
            value = self.l1.get(text)
            if value is MISSING:
                rest.append(key)
            else:
                self._counters.add("l1_hits" if value is not None else "absent_hits")
                result[key] = value
        if not rest:
            return result
        try:
            await self._elect_and_load(rest, wanted, loader, entry_ttl, result, marks)
        except REDIS_DOWN:
            if self.breaker is None:
                raise
            for key in rest:  # one at a time, through get_or_load's degraded path
                if key not in result:
                    result[key] = await self.get_or_load(
                        wanted[key], functools.partial(_one, loader, key), ttl, tags=marks
                    )
        return {key: result[key] for key in wanted}  # in the order asked

    async def _elect_and_load(
        self,
        rest: list[K],
        wanted: dict[K, str],
        loader: Callable[[list[K]], Any],
        ttl: float | None,
        result: dict[K, Any],
        marks: tuple[str, ...],
    ) -> None:
        epoch = self._fill_epoch()  # before the generation: see _new_generation
        generation = await self._generation()  # the keys are loaded under it throughout
        entries = {key: cache_keys(self.namespace, wanted[key], generation) for key in rest}
        rest = await self._plain_hits(rest, wanted, entries, epoch, result)
        if not rest:
            return
        token = _tokens.token_hex()  # the lease token of every key this call loads
        replies = await self._fetch_many([entries[key] for key in rest], token)
        elected: list[K] = []
        refreshing: set[K] = set()  # elected to refresh a stale value others may hold
        waiting: list[K] = []
        for key, reply in zip(rest, replies, strict=True):
            status = int(reply[0])
            if status in (MISS_LOAD, STALE_REFRESH):
                elected.append(key)  # a stale one elected for refresh is loaded now too
                if status == STALE_REFRESH:
                    refreshing.add(key)
                self._counters.add("misses")
            elif status == MISS_WAIT:
                waiting.append(key)
            elif status in (FRESH, STALE):
                value = self._decode(reply[1], wanted[key])
                if value is CORRUPT_VALUE:
                    waiting.append(key)  # get_or_load knows how to replace it
                    continue
                self._counters.add("l2_hits" if status == FRESH else "stale_served")
                if status == FRESH:
                    self._remember(wanted[key], value, int(reply[2]) / 1000, epoch)
                result[key] = value
        if self.bloom is not None:
            admitted: list[K] = []
            rejected: list[K] = []
            for key in elected:  # as get_or_load: surely absent keys are not loaded
                (admitted if await self._bloom_admits(wanted[key]) else rejected).append(key)
            self._counters.add("bloom_rejects", len(rejected))
            absent = [self._write(wanted[key], None, ABSENT_PAYLOAD, ttl) for key in rejected]
            await self._write_back(absent, [entries[key] for key in rejected], token, 0.0, epoch)
            result.update(dict.fromkeys(rejected))
            elected = admitted
        if elected and marks:
            await self._tag(marks, [wanted[key] for key in elected], ttl)
        if elected:
            await self._load_elected(
                elected, wanted, entries, token, loader, ttl, epoch, result, bool(refreshing)
            )
        for key in waiting:
            result[key] = await self.get_or_load(
                wanted[key], functools.partial(_one, loader, key), ttl, tags=marks or None
            )

    async def _plain_hits(
        self,
        keys: list[K],
        wanted: dict[K, str],
        entries: dict[K, CacheKeys],
        epoch: int | None,
        result: dict[K, Any],
    ) -> list[K]:
        """Answer the keys Redis holds fresh with one MGET of their values and hit markers
        (one per node on Cluster), as get_or_load's plain read does; the others are left
        for the fetch script, which elects loaders. Returns those."""
        replies = await self._mget([name for key in keys for name in entries[key].read])
        left = []
        for index, key in enumerate(keys):
            stored, lead = replies[2 * index], replies[2 * index + 1]
            value = self._plain_hit(wanted[key], stored, lead, epoch)
            if value is MISSING:
                left.append(key)
            else:
                result[key] = value
        return left

    async def _load_elected(
        self,
        elected: list[K],
        wanted: dict[K, str],
        entries: dict[K, CacheKeys],
        token: str,
        loader: Callable[[list[K]], Any],
        ttl: float | None,
        epoch: int | None,
        result: dict[K, Any],
        announce: bool,
    ) -> None:
        """Load the `elected` keys with one loader call and write them back; `announce`:
        some refresh a stale value other processes may serve, so the write-back publishes
        an invalidation (see _store)."""
        started = _concurrency.monotonic()
        try:
            async_stop_if_cancelled()  # as get_or_load's load (see _load_and_store)
            loaded = await async_call_loader(functools.partial(loader, list(elected)))
            if not isinstance(loaded, Mapping):
                raise TypeError(
                    f"cache {self.namespace!r}: the loader of get_or_load_many must return "
                    f"a mapping of keys to values, got {type(loaded).__qualname__}"
                )
            encoded = [self._encoded(loaded.get(key), wanted[key]) for key in elected]
        except BaseException:
            self._counters.add("load_errors")
            for key in elected:
                async_background(
                    functools.partial(self._give_back, entries[key], token),
                    f"giving back the load lease of cache key {wanted[key]!r}",
                )
            raise
        took = _concurrency.monotonic() - started
        self._counters.add("loads", len(elected))
        self._counters.load_took(took)
        writes = []
        for key, (value, payload) in zip(elected, encoded, strict=True):
            result[key] = value
            writes.append(self._write(wanted[key], value, payload, ttl))
        await self._write_back(
            writes, [entries[key] for key in elected], token, took, epoch, announce=announce
        )

    async def set_many(
        self,
        items: Mapping[Any, Any] | Iterable[tuple[Any, Any]],
        ttl: float | None = None,
        *,
        tags: Iterable[str] | None = None,
    ) -> int:
        """set() for many entries: one script call per STORE_GROUP entries, one pipelined
        round trip per BATCH (one per node on Cluster; see writes.py). Loads in flight
        are voided and every process's L1 drops these keys, as with set(). Everything is
        encoded before anything is written."""
        entry_ttl = self._ttl(ttl)
        marks = self._tags(tags)
        pairs = items.items() if isinstance(items, Mapping) else items
        prepared = []
        for key, raw in pairs:
            text = self._key(key)
            value, payload = self._encoded(raw, text)
            prepared.append((text, value, payload))
        if self.bloom is not None:
            try:
                for text, value, _ in prepared:
                    if value is not None:
                        await async_call_loader(functools.partial(self.bloom.add, text))
            except BloomFilterError as exc:
                self._bloom_failed(exc, "keys are written but not added to it")
        if marks:
            await self._tag(marks, [text for text, _, _ in prepared], entry_ttl)
        writes = [self._write(text, value, payload, entry_ttl) for text, value, payload in prepared]
        for start in range(0, len(writes), BATCH):
            batch = writes[start : start + BATCH]
            await self._set_entries(batch, publish=True)
            self._dropped_here(*(write.text for write in batch))
        return len(prepared)

    # --- batched Redis calls ---------------------------------------------------------------

    async def _mget(self, keys: list[str]) -> list[Any]:
        replies: list[Any] = []
        for start in range(0, len(keys), BATCH):
            chunk = keys[start : start + BATCH]
            call: Callable[[], Any]
            if isinstance(self._client, redis.asyncio.cluster.RedisCluster):
                call = functools.partial(self._client.mget_nonatomic, chunk)
            else:
                call = functools.partial(self._client.mget, chunk)
            if self.breaker is None:
                replies.extend(await call())
            else:
                replies.extend(await self._guarded(chunk, call))
        return replies

    async def _fetch_many(self, entries: list[CacheKeys], token: str) -> list[Any]:
        """The fetch script for each entry, under the lease token `token`: one pipelined
        round trip per BATCH (one per node on Cluster)."""
        args = (token, ms(self.lease), "", "")
        calls: list[Call] = [(_FETCH, keys.all, args) for keys in entries]
        replies: list[Any] = []
        for start in range(0, len(calls), BATCH):
            # As get_or_load's fetch; the leases of the batches before are given back too.
            batch = self._calls(calls[start : start + BATCH], guarded=True)
            give_back = functools.partial(self._give_back_all, entries[: start + BATCH], token)
            replies.extend(
                await async_giving_back(batch, give_back, "giving back cache load leases")
            )
        return replies

    async def _give_back_all(self, entries: list[CacheKeys], token: str) -> None:
        for keys in entries:
            await self._give_back(keys, token)

    def _value_of(self, raw: Any, text: str) -> Any:
        """A stored value (MISSING if none or undecodable; None if cached as absent)."""
        payload = stored_payload(raw)
        if payload is None:
            return MISSING
        if payload == ABSENT_PAYLOAD:
            return None
        value = self._decode(payload, text)
        return MISSING if value is CORRUPT_VALUE else value


async def _one(loader: Callable[[list[Any]], Any], key: Any) -> Any:
    """A one-key loader for get_or_load from a many-key one."""
    loaded = await async_call_loader(functools.partial(loader, [key]))
    return loaded.get(key) if isinstance(loaded, Mapping) else None
