"""The prometheus_client collector: turns the sink's counts into metric families."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)

from seawall.cache._breaker import CLOSED, CircuitBreaker
from seawall.metrics._families import CACHE_BREAKER_OPEN, FAMILIES, Family
from seawall.metrics._sink import BUCKETS, Sink


def _metric_name(family: Family) -> str:
    # prometheus_client adds `_total` to a counter's samples itself.
    return family.name.removesuffix("_total") if family.kind == "counter" else family.name


class Collector:
    def __init__(self, sink: Sink) -> None:
        self._sink = sink

    def describe(self) -> Iterator[Any]:
        # Families are known up front: the registry checks names without collecting.
        for family in FAMILIES:
            yield self._empty(family)

    def _empty(self, family: Family) -> Any:
        name, labels = _metric_name(family), list(family.labels)
        if family.kind == "counter":
            return CounterMetricFamily(name, family.help, labels=labels)
        if family.kind == "histogram":
            return HistogramMetricFamily(name, family.help, labels=labels)
        return GaugeMetricFamily(name, family.help, labels=labels)

    def collect(self) -> Iterator[Any]:
        counters, histograms, gauges = self._sink.snapshot()
        for cache in list(self._sink.caches):
            breaker = getattr(cache, "breaker", None)
            if isinstance(breaker, CircuitBreaker):
                open_now = 0.0 if breaker.state == CLOSED else 1.0
                gauges[(CACHE_BREAKER_OPEN.name, (cache.namespace,))] = open_now
        for family in FAMILIES:
            metric = self._empty(family)
            if family.kind == "counter":
                for (name, labels), value in counters.items():
                    if name == family.name:
                        metric.add_metric(list(labels), value)
            elif family.kind == "gauge":
                for (name, labels), value in gauges.items():
                    if name == family.name:
                        metric.add_metric(list(labels), value)
            else:
                for (name, labels), histogram in histograms.items():
                    if name != family.name:
                        continue
                    cumulative, buckets = 0, []
                    bounds = (*BUCKETS, float("inf"))
                    for bound, count in zip(bounds, histogram.buckets, strict=True):
                        cumulative += count
                        buckets.append((_bound(bound), cumulative))
                    metric.add_metric(list(labels), buckets, histogram.total)
            yield metric


def _bound(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)
