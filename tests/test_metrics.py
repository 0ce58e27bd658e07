"""seawall.metrics: what the library did, exported through prometheus_client."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import prometheus_client
import pytest
from conftest import Target
from prometheus_client.parser import text_string_to_metric_families

import seawall
import seawall.aio
import seawall.metrics
from seawall.errors import LockNotOwnedError


@pytest.fixture
def registry() -> Iterator[prometheus_client.CollectorRegistry]:
    registry = prometheus_client.CollectorRegistry()
    seawall.metrics.register(registry)
    yield registry
    seawall.metrics.unregister(registry)


def samples(registry: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """{(sample name, sorted labels): value} from the text exposition, as a scraper sees it."""
    text = prometheus_client.generate_latest(registry).decode()
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(registry: Any, name: str, **labels: str) -> float:
    return samples(registry).get((name, tuple(sorted(labels.items()))), 0.0)


def test_cache_requests_loads_and_their_durations(standalone: Target, registry: Any) -> None:
    cache = seawall.Cache(standalone.sync(), "metered", ttl=30)
    listener = cache._listener()  # L1 is filled only while invalidations are heard
    assert listener is not None and listener.wait_listening(10)
    before = samples(registry)

    def delta(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return samples(registry).get(key, 0.0) - before.get(key, 0.0)

    def load() -> str:
        time.sleep(0.03)
        return "row"

    assert cache.get_or_load("k", load) == "row"  # miss, one load
    assert cache.get_or_load("k", load) == "row"  # L1
    seawall.Cache(standalone.sync(), "metered", ttl=30).get_or_load("k", load)  # L2
    assert cache.get_or_load("none", lambda: None) is None  # miss: "not found" cached
    assert cache.get_or_load("none", lambda: None) is None  # absent
    ns = "metered"
    assert delta("seawall_cache_requests_total", namespace=ns, result="miss") == 2
    assert delta("seawall_cache_requests_total", namespace=ns, result="l1_hit") == 1
    assert delta("seawall_cache_requests_total", namespace=ns, result="l2_hit") == 1
    assert delta("seawall_cache_requests_total", namespace=ns, result="absent") == 1
    assert delta("seawall_cache_loads_total", namespace=ns) == 2
    assert delta("seawall_cache_load_duration_seconds_count", namespace=ns) == 2
    took = delta("seawall_cache_load_duration_seconds_sum", namespace=ns)
    assert 0.03 <= took < 5.0
    # The 30 ms load falls above the 0.025 s bucket, the instant one in it (which bucket
    # above it takes the 30 ms depends on how busy the machine is: not asserted).
    assert delta("seawall_cache_load_duration_seconds_bucket", namespace=ns, le="0.025") == 1
    assert delta("seawall_cache_load_duration_seconds_bucket", namespace=ns, le="+Inf") == 2
    stats = cache.stats()
    assert (stats.hits, stats.requests) == (2, 4)
    assert stats.hit_rate == 0.5
    assert seawall.CacheStats().hit_rate == 0.0


def test_the_breaker_state_is_exported_while_the_cache_lives(
    seawall_server_factory: Any, registry: Any
) -> None:
    server = seawall_server_factory()
    import redis

    client = redis.Redis.from_url(server.url, socket_timeout=0.5)
    cache = seawall.Cache(client, "guarded", ttl=30, breaker=seawall.CircuitBreaker())
    assert value(registry, "seawall_cache_breaker_open", namespace="guarded") == 0
    server.kill()
    for _ in range(5):
        assert cache.get_or_load("k", lambda: "from the database") == "from the database"
    assert value(registry, "seawall_cache_breaker_open", namespace="guarded") == 1
    client.close()


def test_lock_acquisitions_waits_and_lost_leases(target: Target, registry: Any) -> None:
    r = target.sync()

    def count(kind: str, result: str) -> float:
        return value(registry, "seawall_lock_acquisitions_total", kind=kind, result=result)

    acquired, busy = count("lock", "acquired"), count("lock", "busy")
    waits = value(registry, "seawall_lock_wait_seconds_count", kind="lock")
    lock = seawall.Lock(r, "metered")
    with lock:
        assert not seawall.Lock(target.sync(), "metered").acquire(blocking=False)
    assert count("lock", "acquired") == acquired + 1
    assert count("lock", "busy") == busy + 1
    assert value(registry, "seawall_lock_wait_seconds_count", kind="lock") == waits + 1

    # An RLock's first entry goes through Lock's acquire: counted once, as an rlock.
    rlocked, locked = count("rlock", "acquired"), count("lock", "acquired")
    rlock = seawall.RLock(r, "metered-r")
    with rlock, rlock:
        pass
    assert count("rlock", "acquired") == rlocked + 2
    assert count("lock", "acquired") == locked

    timeouts = count("semaphore", "timeout")
    one = seawall.Semaphore(r, "metered-s", value=1)
    with one:
        assert not seawall.Semaphore(target.sync(), "metered-s", value=1).acquire(timeout=0.1)
    assert count("semaphore", "timeout") == timeouts + 1

    # A lease taken away under a holder: its renewal finds it gone.
    lost = value(registry, "seawall_lock_leases_lost_total", kind="lock")
    short = seawall.Lock(r, "metered-lost", ttl=0.6)
    assert short.acquire()
    r.delete(short.key)
    deadline = time.monotonic() + 5
    while value(registry, "seawall_lock_leases_lost_total", kind="lock") == lost:
        assert time.monotonic() < deadline, "the lost lease was not counted"
        time.sleep(0.05)
    with pytest.raises(LockNotOwnedError):
        short.release()


def test_asyncio_locks_and_caches_count_too(target: Target, registry: Any) -> None:
    before_lock = value(registry, "seawall_lock_acquisitions_total", kind="lock", result="acquired")
    before_miss = value(registry, "seawall_cache_requests_total", namespace="aio-m", result="miss")

    async def body() -> None:
        r = target.aio()
        async with seawall.aio.Lock(r, "aio-metered"):
            pass
        cache = seawall.aio.Cache(r, "aio-m", ttl=30)
        assert await cache.get_or_load("k", lambda: "v") == "v"
        await r.aclose()

    asyncio.run(body())
    after_lock = value(registry, "seawall_lock_acquisitions_total", kind="lock", result="acquired")
    assert after_lock == before_lock + 1
    after_miss = value(registry, "seawall_cache_requests_total", namespace="aio-m", result="miss")
    assert after_miss == before_miss + 1


def test_stock_takes_by_result(standalone: Target, registry: Any) -> None:
    stock = seawall.Stock(standalone.sync(), "metered-sku")
    stock.put(2)
    assert stock.take("a", 2)
    assert not stock.take("b")
    assert stock.take("a", 2)  # a retry: still taken
    name = "seawall_stock_takes_total"
    assert value(registry, name, stock="metered-sku", result="taken") == 2
    assert value(registry, name, stock="metered-sku", result="refused") == 1


def test_names_follow_prometheus_conventions(standalone: Target, registry: Any) -> None:
    cache = seawall.Cache(standalone.sync(), "named", ttl=30, breaker=seawall.CircuitBreaker())
    cache.get_or_load("k", lambda: "v")
    with seawall.Lock(standalone.sync(), "named"):
        pass
    for family in seawall.metrics.FAMILIES:
        assert family.name.startswith("seawall_")
        if family.kind == "counter":
            assert family.name.endswith("_total"), family.name
        if family.kind == "histogram":
            assert family.name.endswith("_seconds"), family.name
    text = prometheus_client.generate_latest(registry).decode()
    types = {
        line.split()[2]: line.split()[3] for line in text.splitlines() if line.startswith("# TYPE")
    }
    assert types["seawall_cache_requests_total"] == "counter"
    assert types["seawall_lock_wait_seconds"] == "histogram"
    assert types["seawall_cache_breaker_open"] == "gauge"


def test_nothing_is_counted_until_registered(standalone: Target) -> None:
    from seawall.metrics._sink import SINK

    assert not SINK.enabled
    counters, _, _ = SINK.snapshot()
    seawall.Cache(standalone.sync(), "unmetered", ttl=30).get_or_load("k", lambda: "v")
    assert SINK.snapshot()[0] == counters
    registry = prometheus_client.CollectorRegistry()
    assert seawall.metrics.register(registry) is seawall.metrics.register(registry)
    seawall.metrics.unregister(registry)
    assert not SINK.enabled
