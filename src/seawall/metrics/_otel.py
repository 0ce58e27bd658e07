"""OpenTelemetry export of the same families: asynchronous instruments read the sink.

Counters become observable counters and gauges observable gauges, under the family names
(a counter without its `_total`, which OpenTelemetry's Prometheus exporter adds back).
OpenTelemetry has no asynchronous histogram, so a duration family is exported as two
observable counters, `<name>_count` and `<name>_sum` (seconds): enough for a mean and a
rate; the bucketed histogram stays on the Prometheus side.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from seawall.cache._breaker import CLOSED, CircuitBreaker
from seawall.metrics._families import CACHE_BREAKER_OPEN, FAMILIES, Family
from seawall.metrics._sink import Sink

__all__ = ["instrument"]


def _attributes(family: Family, labels: tuple[str, ...]) -> dict[str, str]:
    return dict(zip(family.labels, labels, strict=False))


def _gauges(sink: Sink) -> dict[tuple[str, tuple[str, ...]], float]:
    gauges = sink.snapshot()[2]
    for cache in list(sink.caches):
        breaker = getattr(cache, "breaker", None)
        if isinstance(breaker, CircuitBreaker):
            open_now = 0.0 if breaker.state == CLOSED else 1.0
            gauges[(CACHE_BREAKER_OPEN.name, (cache.namespace,))] = open_now
    return gauges


def _reader(
    sink: Sink, family: Family, pick: Callable[[Sink], dict[tuple[str, tuple[str, ...]], float]]
) -> Callable[[CallbackOptions], Iterable[Observation]]:
    def observe(options: CallbackOptions) -> Iterable[Observation]:
        return [
            Observation(value, _attributes(family, labels))
            for (name, labels), value in pick(sink).items()
            if name == family.name
        ]

    return observe


def instrument(meter: Meter, sink: Sink) -> list[Any]:
    """Create one asynchronous instrument per family (two per histogram) on `meter`."""
    made: list[Any] = []
    for family in FAMILIES:
        if family.kind == "counter":
            made.append(
                meter.create_observable_counter(
                    family.name.removesuffix("_total"),
                    callbacks=[_reader(sink, family, lambda s: s.snapshot()[0])],
                    description=family.help,
                )
            )
        elif family.kind == "gauge":
            made.append(
                meter.create_observable_gauge(
                    family.name, callbacks=[_reader(sink, family, _gauges)], description=family.help
                )
            )
        else:
            for suffix, field, unit in (("_count", "count", "1"), ("_sum", "total", "s")):
                made.append(
                    meter.create_observable_counter(
                        family.name + suffix,
                        callbacks=[
                            _reader(
                                sink,
                                family,
                                lambda s, f=field: {  # type: ignore[misc]
                                    key: float(getattr(h, f)) for key, h in s.snapshot()[1].items()
                                },
                            )
                        ],
                        unit=unit,
                        description=f"{family.help} ({field})",
                    )
                )
    return made
