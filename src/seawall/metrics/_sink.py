"""Process-wide counts that `seawall.metrics` exports: recorded only once registered.

The library calls `count`, `observe` and `gauge` at the points that matter (a cache
request's result, a load's duration, a lock's wait). Until an exporter is registered each
call is one attribute read and a return, so an application that exports nothing pays
nothing measurable. Counts are process-wide and only grow (Prometheus counters): a Cache
or Lock object that is garbage-collected keeps its contribution.
"""

from __future__ import annotations

import bisect
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

Labels = tuple[str, ...]

# Seconds. Cache loads and lock waits span a fast local hit (sub-millisecond) to a slow
# database query or a contended lock (seconds).
BUCKETS: tuple[float, ...] = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip


@dataclass
class Histogram:
    buckets: list[int] = field(default_factory=lambda: [0] * (len(BUCKETS) + 1))
    total: float = 0.0
    count: int = 0

    def observe(self, value: float) -> None:
        # Non-cumulative here (one slot per bucket, the last for +Inf); the exporter sums.
        self.buckets[bisect.bisect_left(BUCKETS, value)] += 1
        self.total += value
        self.count += 1


class Sink:
    def __init__(self) -> None:
        self.enabled = False
        self._mutex = threading.Lock()
        self._counters: dict[tuple[str, Labels], float] = {}
        self._histograms: dict[tuple[str, Labels], Histogram] = {}
        self._gauges: dict[tuple[str, Labels], float] = {}
        # Live objects read at export time (a breaker's state is a fact of now).
        self.caches: weakref.WeakSet[Any] = weakref.WeakSet()

    def count(self, name: str, labels: Labels, amount: float = 1) -> None:
        if not self.enabled:
            return
        with self._mutex:
            key = (name, labels)
            self._counters[key] = self._counters.get(key, 0) + amount

    def observe(self, name: str, labels: Labels, value: float) -> None:
        if not self.enabled:
            return
        with self._mutex:
            key = (name, labels)
            histogram = self._histograms.get(key)
            if histogram is None:
                histogram = self._histograms[key] = Histogram()
            histogram.observe(value)

    def gauge(self, name: str, labels: Labels, value: float) -> None:
        if not self.enabled:
            return
        with self._mutex:
            self._gauges[(name, labels)] = value

    def snapshot(
        self,
    ) -> tuple[
        dict[tuple[str, Labels], float],
        dict[tuple[str, Labels], Histogram],
        dict[tuple[str, Labels], float],
    ]:
        with self._mutex:
            histograms = {
                key: Histogram(list(h.buckets), h.total, h.count)
                for key, h in self._histograms.items()
            }
            return dict(self._counters), histograms, dict(self._gauges)


SINK = Sink()
