"""Counters of one seawall.Cache in one process, readable as a snapshot."""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, fields

from seawall.metrics._families import CACHE_LOAD_SECONDS, CACHE_STAT_METRICS
from seawall.metrics._sink import SINK


@dataclass(frozen=True, slots=True)
class CacheStats:
    """What one Cache object did in this process since it was made."""

    l1_hits: int = 0  # answered from this process's memory, no I/O
    l2_hits: int = 0  # fresh values read from Redis
    misses: int = 0  # nothing in Redis; this caller was elected to load
    loads: int = 0  # loader calls that returned (including background refreshes)
    load_errors: int = 0  # loader calls that raised
    stale_served: int = 0  # logically expired values returned while a refresh runs
    waits: int = 0  # callers that waited for a load by another caller or process
    refreshes: int = 0  # background refreshes started (stale or early)
    voided: int = 0  # loads not written back: a delete or set came while they ran
    corrupt: int = 0  # values in Redis that could not be decoded (treated as misses)
    absent_hits: int = 0  # "not found" answers served from the cache (either level)
    bloom_rejects: int = 0  # misses the Bloom filter answered "absent" without the loader

    @property
    def requests(self) -> int:
        """Reads answered: each counts once as a hit of some kind, a miss or a wait."""
        return self.hits + self.misses + self.waits

    @property
    def hits(self) -> int:
        """Reads answered from the cache: L1, L2, a stale value or a cached "not found"."""
        return self.l1_hits + self.l2_hits + self.stale_served + self.absent_hits

    @property
    def hit_rate(self) -> float:
        """hits / requests (0.0 before the first read): the share the loader never saw."""
        requests = self.requests
        return self.hits / requests if requests else 0.0


NAMES = tuple(f.name for f in fields(CacheStats))


class Counters:
    """Exact counts, shared by threads and tasks, cheap enough for every L1 hit.

    A count of one (an L1 hit, most of them) ticks an itertools.count: `next()` is one C
    call, atomic under the GIL, about a fifth of the cost of taking a lock, which was the
    largest part of an L1 hit's time. Larger amounts go to a dict under the mutex. A
    ticker can only be read by ticking it, so each snapshot ticks every ticker once and
    subtracts the snapshots taken before it.
    """

    def __init__(self, namespace: str = "") -> None:
        self._mutex = threading.Lock()
        self._counts = dict.fromkeys(NAMES, 0)
        self._ticks = {name: itertools.count() for name in NAMES}
        self._snapshots = 0
        self._namespace = (namespace,)

    def add(self, name: str, amount: int = 1) -> None:
        if amount == 1:
            next(self._ticks[name])
        else:
            with self._mutex:
                self._counts[name] += amount
        if SINK.enabled:
            family, labels = CACHE_STAT_METRICS[name]
            SINK.count(family.name, self._namespace + labels, amount)

    def load_took(self, seconds: float) -> None:
        """A loader call's duration, for the exported histogram."""
        SINK.observe(CACHE_LOAD_SECONDS.name, self._namespace, seconds)

    def snapshot(self) -> CacheStats:
        with self._mutex:
            before = self._snapshots
            self._snapshots += 1
            return CacheStats(
                **{
                    name: count + next(self._ticks[name]) - before
                    for name, count in self._counts.items()
                }
            )
