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

__all__ = ["FAMILIES", "Family", "register", "unregister"]

_registered: list[tuple[Any, Any]] = []


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
    SINK.enabled = bool(_registered)
