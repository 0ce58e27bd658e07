"""Bounded summaries of a scan: the top N, per-type totals and size percentiles.

Memory never grows with the keyspace: `TopN` is a heap of N entries, `Histogram` has one
counter per size bucket (buckets grow by 2**(1/8), about 9 % wide, so a percentile is
exact to within 9 %), `TypeTotals` one record per Redis type.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

__all__ = ["Histogram", "TopN", "TypeTotal", "TypeTotals", "human_bytes"]

_T = TypeVar("_T")
_STEPS_PER_DOUBLING = 8


class TopN(Generic[_T]):
    """The `n` items with the largest weight seen so far (ties: the first seen wins)."""

    def __init__(self, n: int) -> None:
        if n < 1:
            raise ValueError(f"--top must be >= 1, got {n}")
        self.n = n
        self._heap: list[tuple[float, int, _T]] = []
        self._order = itertools.count()

    def offer(self, weight: float, item: _T) -> None:
        entry = (weight, -next(self._order), item)
        if len(self._heap) < self.n:
            heapq.heappush(self._heap, entry)
        elif entry[:2] > self._heap[0][:2]:
            heapq.heapreplace(self._heap, entry)

    def floor(self) -> float:
        """The weight an item must beat to get in (-inf while not full)."""
        return self._heap[0][0] if len(self._heap) >= self.n else -math.inf

    def items(self) -> list[_T]:
        """Heaviest first."""
        return [item for _, _, item in sorted(self._heap, key=lambda e: e[:2], reverse=True)]

    def __len__(self) -> int:
        return len(self._heap)


class Histogram:
    """Counts of values in log-spaced buckets; `percentile(q)` within one bucket's width."""

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.total = 0
        self.largest = 0

    @staticmethod
    @functools.lru_cache(maxsize=8192)  # sizes repeat: most keys of a type look alike
    def bucket(value: int) -> int:
        return 0 if value <= 1 else math.ceil(math.log2(value) * _STEPS_PER_DOUBLING)

    def add(self, value: int) -> None:
        index = self.bucket(value)
        self.counts[index] = self.counts.get(index, 0) + 1
        self.total += 1
        self.largest = max(self.largest, value)

    def percentile(self, q: float) -> int:
        """The smallest bucket bound at or under which `q` percent of values fall."""
        if not self.total:
            return 0
        wanted = max(1, math.ceil(self.total * q / 100))
        seen = 0
        for index in sorted(self.counts):
            seen += self.counts[index]
            if seen >= wanted:
                bound = 1 if index == 0 else round(2 ** (index / _STEPS_PER_DOUBLING))
                return min(bound, self.largest)
        return self.largest


@dataclass
class TypeTotal:
    keys: int = 0
    bytes: int = 0
    sizes: Histogram = field(default_factory=Histogram)


class TypeTotals:
    def __init__(self) -> None:
        self.by_type: dict[str, TypeTotal] = {}
        self.all = TypeTotal()

    def add(self, type_: str, size: int) -> None:
        for total in (self.by_type.setdefault(type_, TypeTotal()), self.all):
            total.keys += 1
            total.bytes += size
            total.sizes.add(size)

    def rows(self) -> Iterable[tuple[str, TypeTotal]]:
        yield from sorted(self.by_type.items(), key=lambda kv: -kv[1].bytes)
        yield "all", self.all


def human_bytes(value: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"  # pragma: no cover - unreachable
