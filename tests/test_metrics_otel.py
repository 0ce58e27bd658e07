"""seawall.metrics.register_otel(): the same families through OpenTelemetry's SDK."""

from __future__ import annotations

from typing import Any

from conftest import Target
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import seawall
import seawall.metrics


def _points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    data = reader.get_metrics_data()
    assert data is not None
    return {
        metric.name: list(metric.data.data_points)
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }


def test_cache_reads_and_load_durations_reach_an_otel_reader(standalone: Target) -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    made = seawall.metrics.register_otel(provider)
    try:
        assert seawall.metrics.register_otel(provider) is made
        _read_and_check(standalone, reader)
    finally:
        seawall.metrics.unregister_otel(provider)
        provider.shutdown()


def _read_and_check(standalone: Target, reader: InMemoryMetricReader) -> None:
    cache = seawall.Cache(standalone.sync(), "otel", ttl=60)
    for _ in range(3):
        cache.get_or_load("k", lambda: "v")
    points = _points(reader)
    requests = {
        p.attributes["result"]: p.value
        for p in points["seawall_cache_requests"]
        if p.attributes["namespace"] == "otel"
    }
    # The second read may come from Redis while the L1's invalidation listener starts.
    assert requests["miss"] == 1 and requests.get("l1_hit", 0) + requests.get("l2_hit", 0) == 2
    [loads] = [p for p in points["seawall_cache_load_duration_seconds_count"]
               if p.attributes["namespace"] == "otel"]  # fmt: skip
    assert loads.value == 1
