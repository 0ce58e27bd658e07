"""The metric families seawall exports: names, kinds, help and label names, in one table.

Names follow Prometheus conventions: a `seawall_<family>_` prefix, counters end in
`_total`, durations are histograms in seconds, and no ratios (a hit rate is computed by
the query: `sum(rate(...{result=~".*hit|stale|absent"}[5m])) / sum(rate(...[5m]))`).
Labels carry bounded values only: a cache namespace, a lock kind, a stock name. Lock
names are left out on purpose: one lock per order id would make one series per order.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

Kind = Literal["counter", "histogram", "gauge"]


class Family(NamedTuple):
    name: str
    kind: Kind
    help: str
    labels: tuple[str, ...]


CACHE_REQUESTS = Family(
    "seawall_cache_requests_total",
    "counter",
    "Cache reads by result: l1_hit (process memory), l2_hit (Redis), stale (an expired "
    "value served while one refresh runs), absent (a cached 'not found'), miss (this "
    "caller loaded), wait (collapsed into a load by another caller or process)",
    ("namespace", "result"),
)
CACHE_LOADS = Family(
    "seawall_cache_loads_total", "counter", "Loader calls that returned", ("namespace",)
)
CACHE_LOAD_ERRORS = Family(
    "seawall_cache_load_errors_total", "counter", "Loader calls that raised", ("namespace",)
)
CACHE_LOAD_SECONDS = Family(
    "seawall_cache_load_duration_seconds",
    "histogram",
    "Time a loader call took (database time behind a miss or refresh)",
    ("namespace",),
)
CACHE_REFRESHES = Family(
    "seawall_cache_refreshes_total",
    "counter",
    "Background refreshes started (stale-while-revalidate or early XFetch)",
    ("namespace",),
)
CACHE_VOIDED = Family(
    "seawall_cache_voided_total",
    "counter",
    "Loads not written back because a delete or set came while they ran",
    ("namespace",),
)
CACHE_CORRUPT = Family(
    "seawall_cache_corrupt_total",
    "counter",
    "Values in Redis that could not be decoded (treated as misses)",
    ("namespace",),
)
CACHE_BLOOM_REJECTS = Family(
    "seawall_cache_bloom_rejects_total",
    "counter",
    "Misses the Bloom filter answered 'absent' without calling the loader",
    ("namespace",),
)
CACHE_BREAKER_OPEN = Family(
    "seawall_cache_breaker_open",
    "gauge",
    "1 while a cache's circuit breaker keeps Redis calls off (open or half-open), else 0",
    ("namespace",),
)
LOCK_ACQUISITIONS = Family(
    "seawall_lock_acquisitions_total",
    "counter",
    "acquire() calls by result: acquired, timeout (waited and gave up), busy (not "
    "blocking and held elsewhere), error (raised)",
    ("kind", "result"),
)
LOCK_WAIT_SECONDS = Family(
    "seawall_lock_wait_seconds",
    "histogram",
    "Time acquire() took until the lock was held",
    ("kind",),
)
LOCK_LEASES_LOST = Family(
    "seawall_lock_leases_lost_total",
    "counter",
    "Holds whose lease ran out or was taken while the holder still held it",
    ("kind",),
)
STOCK_TAKES = Family(
    "seawall_stock_takes_total",
    "counter",
    "Stock.take() calls by result: taken (the order holds its units, a retry included) or "
    "refused (too few units left, or the order was cancelled)",
    ("stock", "result"),
)
ORDER_SINK_SAVED = Family(
    "seawall_order_sink_saved_total",
    "counter",
    "Order log entries an OrderSink saved to the database",
    ("stock",),
)
ORDER_SINK_LAG = Family(
    "seawall_order_sink_lag_seconds",
    "gauge",
    "Age of the newest entry in the OrderSink's last saved batch when it was saved",
    ("stock",),
)
FOLLOWER_LAG = Family(
    "seawall_follower_lag_seconds",
    "gauge",
    "Time from a change's commit in the database until the follower invalidated it",
    ("source",),
)
FOLLOWER_EVENTS = Family(
    "seawall_follower_events_total",
    "counter",
    "Row changes the change-log follower invalidated",
    ("source",),
)
FOLLOWER_CLEARS = Family(
    "seawall_follower_clears_total",
    "counter",
    "Cache namespaces the change-log follower cleared whole, by cause (TRUNCATE, a "
    "statement-logged change, a key value that cannot key the cache)",
    ("source", "cause"),
)

FAMILIES: tuple[Family, ...] = (
    CACHE_REQUESTS,
    CACHE_LOADS,
    CACHE_LOAD_ERRORS,
    CACHE_LOAD_SECONDS,
    CACHE_REFRESHES,
    CACHE_VOIDED,
    CACHE_CORRUPT,
    CACHE_BLOOM_REJECTS,
    CACHE_BREAKER_OPEN,
    LOCK_ACQUISITIONS,
    LOCK_WAIT_SECONDS,
    LOCK_LEASES_LOST,
    STOCK_TAKES,
    ORDER_SINK_SAVED,
    ORDER_SINK_LAG,
    FOLLOWER_LAG,
    FOLLOWER_EVENTS,
    FOLLOWER_CLEARS,
)

# CacheStats field -> (family, extra label values): what one Counters.add() also counts.
CACHE_STAT_METRICS: dict[str, tuple[Family, tuple[str, ...]]] = {
    "l1_hits": (CACHE_REQUESTS, ("l1_hit",)),
    "l2_hits": (CACHE_REQUESTS, ("l2_hit",)),
    "stale_served": (CACHE_REQUESTS, ("stale",)),
    "absent_hits": (CACHE_REQUESTS, ("absent",)),
    "misses": (CACHE_REQUESTS, ("miss",)),
    "waits": (CACHE_REQUESTS, ("wait",)),
    "loads": (CACHE_LOADS, ()),
    "load_errors": (CACHE_LOAD_ERRORS, ()),
    "refreshes": (CACHE_REFRESHES, ()),
    "voided": (CACHE_VOIDED, ()),
    "corrupt": (CACHE_CORRUPT, ()),
    "bloom_rejects": (CACHE_BLOOM_REJECTS, ()),
}
