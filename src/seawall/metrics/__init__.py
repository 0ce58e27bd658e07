"""Export what seawall does to Prometheus: `seawall.metrics.register()`.

    import prometheus_client, seawall.metrics

    seawall.metrics.register()                  # the default registry
    prometheus_client.start_http_server(9100)   # or your framework's /metrics route

Counting starts at `register()` and covers every Cache, lock, Stock and OrderSink in the
process (sync and asyncio). The families and their labels are listed in
`seawall.metrics.FAMILIES` and in docs/metrics.md. Needs the `prometheus` extra:
`pip install 'seawall[prometheus]'`.
"""

from __future__ import annotations

from typing import Any

from seawall.metrics._families import FAMILIES, Family
from seawall.metrics._sink import SINK

__all__ = ["FAMILIES", "Family", "register", "register_otel", "unregister", "unregister_otel"]

_registered: list[tuple[Any, Any]] = []
# (meter provider, its instruments); not `_otel`, the name of the submodule
_providers: list[tuple[Any, list[Any]]] = []


def register(registry: Any = None) -> Any:
    """Start counting and export to `registry` (prometheus_client's default when None).

    Returns the collector (pass it to `registry.unregister` to stop exporting). Calling
    it again for the same registry returns the collector already there.
    """
    try:
        import prometheus_client
    except ImportError:
        raise ImportError(
            "seawall.metrics.register() needs prometheus_client: pip install 'seawall[prometheus]'"
        ) from None
    from seawall.metrics._prometheus import Collector

    target = prometheus_client.REGISTRY if registry is None else registry
    for known, collector in _registered:
        if known is target:
            return collector
    collector = Collector(SINK)
    target.register(collector)
    _registered.append((target, collector))
    SINK.enabled = True
    return collector


def unregister(registry: Any = None) -> None:
    """Stop exporting to `registry`; counting stops when no registry is left."""
    import prometheus_client

    target = prometheus_client.REGISTRY if registry is None else registry
    for index, (known, collector) in enumerate(_registered):
        if known is target:
            target.unregister(collector)
            del _registered[index]
            break
    SINK.enabled = bool(_registered) or bool(_providers)


def register_otel(meter_provider: Any = None) -> list[Any]:
    """Start counting and export the same families as OpenTelemetry instruments, read
    at each collection, on `meter_provider` (the global one when None). Needs the `otel`
    extra: `pip install 'seawall[otel]'`. Returns the instruments; calling it again for
    the same provider returns those already made."""
    try:
        from opentelemetry import metrics
    except ImportError:
        raise ImportError(
            "seawall.metrics.register_otel() needs OpenTelemetry: pip install 'seawall[otel]'"
        ) from None
    from seawall.metrics._otel import instrument

    provider = metrics.get_meter_provider() if meter_provider is None else meter_provider
    for known, instruments in _providers:
        if known is provider:
            return instruments
    instruments = instrument(provider.get_meter("seawall"), SINK)
    _providers.append((provider, instruments))
    SINK.enabled = True
    return instruments


def unregister_otel(meter_provider: Any = None) -> None:
    """Stop counting for `meter_provider` (its instruments stay, reporting nothing new:
    shut the provider down to drop them); counting stops when no exporter is left."""
    from opentelemetry import metrics

    provider = metrics.get_meter_provider() if meter_provider is None else meter_provider
    _providers[:] = [(known, made) for known, made in _providers if known is not provider]
    SINK.enabled = bool(_registered) or bool(_providers)
