"""Batched writes of seawall.aio.Cache: set_many, warm, and get_or_load_many's write-backs.

Each writes its entries with cache_store_many.lua, up to STORE_GROUP entries per script
call, every entry exactly as set() or get_or_load's write-back writes one, and with one
invalidation message per call naming all its keys instead of one per key. The calls of a
batch go in one pipelined round trip: one per node on Cluster, where a call takes the
entries of one hash slot only (mostly a single one, so a call per entry there).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import redis.asyncio.cluster
from redis.crc import key_slot

from seawall.cache._async.base import _STORE_MANY, REDIS_DOWN, ms
from seawall.cache._async.generation import Call
from seawall.cache._async.loading import WAKE_PAYLOAD_LIMIT, AsyncCacheCore
from seawall.cache._codec import CACHE_WAKE_PREFIX, CacheKeys, cache_keys
from seawall.shared import _concurrency

# Keys per pipeline round trip (and per MGET).
BATCH = 1000

# Entries per call of cache_store_many.lua: a call holds the server about 5 us an entry,
# and other clients get their turn between the calls of a pipeline.
STORE_GROUP = 100


class Write(NamedTuple):
    """An entry to write: its key (as the L1 keeps it), value and payload, and its fresh
    time and stale window (seconds)."""

    text: str
    value: Any
    payload: bytes
    fresh: float
    stale: float


def store_groups(entries: Sequence[CacheKeys], cluster: bool) -> list[list[int]]:
    """The indices of the entries each cache_store_many call writes: STORE_GROUP at most,
    and on Cluster only entries of one hash slot, as all keys of a call must be."""
    if not cluster:
        return [
            list(range(start, min(start + STORE_GROUP, len(entries))))
            for start in range(0, len(entries), STORE_GROUP)
        ]
    slots: dict[int, list[int]] = {}
    for index, keys in enumerate(entries):
        slots.setdefault(key_slot(keys.value.encode()), []).append(index)
    return [
        same[start : start + STORE_GROUP]
        for same in slots.values()
        for start in range(0, len(same), STORE_GROUP)
    ]


class AsyncCacheWrites(AsyncCacheCore):
    """Writing many entries at once, for seawall.aio.Cache's bulk calls."""

    def _on_cluster(self) -> bool:
        return isinstance(self._client, redis.asyncio.cluster.RedisCluster)

    def _write(self, text: str, value: Any, payload: bytes, ttl: float | None) -> Write:
        fresh, stale = self._entry_ttls(value, ttl)
        return Write(text, value, payload, fresh, stale)

    def _store_calls(
        self,
        writes: Sequence[Write],
        entries: Sequence[CacheKeys],
        groups: list[list[int]],
        token: str,
        took: float,
        publish: bool,
    ) -> list[Call]:
        """A cache_store_many call per group of `writes` (into `entries`, their keys),
        under the lease `token` ("" for explicit sets). With `publish`, each call publishes
        one invalidation message naming its keys."""
        lead = self._lead(took)
        calls: list[Call] = []
        for group in groups:
            channel = message = ""
            if publish:
                channel, message = self._invalidations([writes[i].text for i in group])
            keys: list[str] = []
            args: list[Any] = [
                token,
                ms(took) if took else 0,
                CACHE_WAKE_PREFIX,
                channel,
                message,
                WAKE_PAYLOAD_LIMIT,
                lead,
            ]
            for i in group:
                write = writes[i]
                keys.extend(entries[i].all)
                stale = ms(write.stale) if write.stale else 0
                args += (write.payload, ms(write.fresh + write.stale), stale)
            calls.append((_STORE_MANY, keys, args))
        return calls

    async def _set_entries(
        self, writes: list[Write], *, publish: bool, guarded: bool = True
    ) -> None:
        """Explicit sets (set_many; warm, which publishes one message of its own), under
        the namespace's generation as Redis holds it; then kept in our L1, as set() keeps
        its value. Held to the breaker if `guarded`."""
        epoch = self._fill_epoch()
        cluster = self._on_cluster()

        def calls_at(generation: int) -> list[Call]:
            entries = [cache_keys(self.namespace, write.text, generation) for write in writes]
            groups = store_groups(entries, cluster)
            return self._store_calls(writes, entries, groups, "", 0.0, publish)

        await self._at_current(calls_at, guarded=guarded)
        # After the write (see L1.replace): a read that began before it cannot keep the
        # old value here.
        self.l1.replace([(write.text, write.value, write.fresh) for write in writes], epoch)

    async def _write_back(
        self,
        writes: list[Write],
        entries: list[CacheKeys],
        token: str,
        took: float,
        epoch: int | None,
        *,
        announce: bool = False,
    ) -> None:
        """Write loaded values back into `entries`, the generation their load began in,
        each only if its lease still holds `token` (a delete or set meanwhile voided it), as
        get_or_load writes one back; kept in our L1 if written. `announce`: publish an
        invalidation of these keys, as set() does (refreshes of stale values, which other
        processes may be serving). With a circuit breaker, Redis being away leaves them
        unwritten, and the caller still gets them."""
        for start in range(0, len(writes), BATCH):
            batch, keys = writes[start : start + BATCH], entries[start : start + BATCH]
            groups = store_groups(keys, self._on_cluster())
            calls = self._store_calls(batch, keys, groups, token, took, publish=announce)
            try:
                replies = await self._calls(calls, guarded=True)
            except REDIS_DOWN:
                if self.breaker is None:
                    raise
                _concurrency.log.info(
                    "cache %r: %d loaded keys not written back: Redis unreachable",
                    self.namespace,
                    len(writes) - start,
                )
                return
            announced = []
            for group, reply in zip(groups, replies, strict=True):
                for index, written in zip(group, reply, strict=True):
                    write = batch[index]
                    if not int(written):
                        self._voided(write.text)
                    elif announce:
                        announced.append(write)
                    else:
                        self._remember(write.text, write.value, write.fresh, epoch)
            if announced:
                # As an announced single store: see L1.replace; our own message skips the
                # other L1s of this process, so they are told here.
                self.l1.replace([(w.text, w.value, w.fresh) for w in announced], epoch)
                self._dropped_here(*(write.text for write in announced))
