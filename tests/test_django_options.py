"""seawall.django.RedisCache's options beyond Django's, against real servers: an L1 that
another process's write empties (tested across two processes), the circuit breaker with
a frozen server."""

from __future__ import annotations

import asyncio
import pickle
import threading
import time
from collections.abc import Iterator
from typing import Any

import djangoworkers
import pytest
import redis
from conftest import SPAWN

djangoworkers.setup("redis://unused", "django.core.cache.backends.locmem.LocMemCache")

from django.core.exceptions import ImproperlyConfigured  # noqa: E402

from seawall.django import RedisCache  # noqa: E402
from seawall.django._local import MISSING  # noqa: E402
from seawall.errors import CacheUnavailable  # noqa: E402

# Long enough that only an invalidation can explain a new value being seen.
L1 = {"l1_size": 1000, "l1_ttl": 60.0}


@pytest.fixture
def url(seawall_server: Any) -> Iterator[str]:
    admin = redis.Redis.from_url(seawall_server.url)
    admin.flushdb()
    admin.close()
    yield seawall_server.url


def _until(condition: Any, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "not within the bound"
        time.sleep(0.005)


def test_a_write_in_one_process_empties_the_l1_of_another(url: str) -> None:
    writer = RedisCache(url, {"OPTIONS": L1})
    writer.set("k", "v1")
    inbox, outbox = SPAWN.Queue(), SPAWN.Queue()
    reader = SPAWN.Process(target=djangoworkers.l1_reader, args=(url, L1, inbox, outbox))
    reader.start()
    admin = redis.Redis.from_url(url)
    try:
        inbox.put(("fill", "k", "v1"))
        assert outbox.get(timeout=30), "the reader's L1 never held the value"
        # Changed behind the backend's back (no invalidation): the reader keeps its copy,
        # so its reads were served by its L1.
        admin.set(writer.make_key("k"), pickle.dumps("changed in Redis only"))
        inbox.put(("read", "k", 0.3))
        assert outbox.get(timeout=30) == ["v1"]
        # Through the backend: the write publishes the key, the reader drops its copy.
        inbox.put(("until", "k", "v2", 5.0))
        time.sleep(0.2)  # the reader is polling
        written_at = time.time()
        writer.set("k", "v2")
        seen_at = outbox.get(timeout=30)
        assert seen_at is not None, "the reader never saw the new value (its L1 kept v1)"
        assert seen_at - written_at < 1.0, seen_at - written_at
        # A delete too.
        inbox.put(("fill", "k", "v2"))
        assert outbox.get(timeout=30)
        inbox.put(("until", "k", None, 5.0))
        time.sleep(0.2)
        writer.delete("k")
        assert outbox.get(timeout=30) is not None, "the reader kept serving a deleted key"
        inbox.put(None)
        reader.join(10)
    finally:
        if reader.is_alive():
            reader.kill()
        admin.close()
    assert reader.exitcode == 0


def test_the_l1_serves_a_hit_without_redis_and_a_copy_each_time(
    seawall_server_factory: Any,
) -> None:
    # A server of its own: no other test's objects send anything to it in the background.
    url = seawall_server_factory().url
    cache = RedisCache(url, {"OPTIONS": L1})
    local = cache._x.local()
    assert local is not None
    cache.set("d", {"a": [1]})
    _until(lambda: cache.get("d") == {"a": [1]} and len(local.l1) == 1)
    admin = redis.Redis.from_url(url)
    admin.config_set("maxmemory-policy", "noeviction")
    before = _data_commands(admin)
    first = cache.get("d")
    first["a"].append(2)  # a caller changing what it got
    assert cache.get("d") == {"a": [1]}
    assert cache.has_key("d")
    assert _data_commands(admin) == before, "an L1 hit went to Redis"
    admin.close()


# What this count leaves out: the INFO that reads it, and what the cache's listener sends
# in the background.
_NOT_DATA = ("info", "ping", "subscribe", "psubscribe", "ssubscribe", "client", "hello")


def _data_commands(admin: redis.Redis) -> int:
    """Commands the server has run that read or write keys, by INFO commandstats."""
    stats = admin.info("commandstats")
    return sum(
        row["calls"]
        for name, row in stats.items()
        if name.removeprefix("cmdstat_").split("|")[0] not in _NOT_DATA
    )


def test_an_l1_entry_never_outlives_its_expiry_in_redis(url: str) -> None:
    cache = RedisCache(url, {"OPTIONS": L1})
    local = cache._x.local()
    assert local is not None
    cache.set("short", "x", timeout=0.3)
    _until(lambda: cache.get("short") == "x" and len(local.l1) >= 1)
    time.sleep(0.4)
    assert cache.get("short") is None


def test_the_async_face_shares_the_l1_and_invalidates_it(url: str) -> None:
    cache = RedisCache(url, {"OPTIONS": L1})
    other = RedisCache(url, {"OPTIONS": L1})  # another thread's instance: the same L1
    local = cache._x.local()
    assert local is not None and other._x.local() is local
    key = cache.make_key("a")

    async def main() -> None:
        await cache.aset("a", 1)
        _until(lambda: cache.get("a") == 1 and local.get(key) is not MISSING)
        assert await cache.aget("a") == 1
        await other.aset("a", 2)  # through the asyncio client: dropped here at once
        assert local.get(key) is MISSING
        assert await cache.aget("a") == 2

    asyncio.run(main())


def test_the_breaker_answers_at_once_while_redis_is_frozen(
    seawall_server_factory: Any,
) -> None:
    server = seawall_server_factory()
    options = {
        "breaker": {"failure_threshold": 2, "open_for": 0.5, "call_timeout": 0.2},
        "l1_size": 100,
        "l1_ttl": 5.0,
    }
    cache = RedisCache(server.url, {"OPTIONS": options})
    local = cache._x.local()
    breaker = cache._x.breaker()
    assert local is not None and breaker is not None
    cache.set("held", "from the L1")
    _until(lambda: cache.get("held") == "from the L1" and len(local.l1) == 1)
    server.pause()
    try:
        started = time.monotonic()
        assert cache.get("cold", "default") == "default"  # timed out: the breaker opens
        assert time.monotonic() - started < 2.0
        assert breaker.state == "open"
        started = time.monotonic()
        assert cache.get("cold", "default") == "default"
        assert cache.get("held") == "from the L1"
        assert cache.get_or_set("loaded", lambda: "by the callable") == "by the callable"
        assert cache.add("new", 1) is False
        assert cache.set_many({"a": 1, "b": 2}) == ["a", "b"]
        cache.set("x", 1)  # skipped, not raised
        assert cache.delete("x") is False
        with pytest.raises(CacheUnavailable, match="breaker is open"):
            cache.incr("counter")
        # None of these waited on the frozen server.
        assert time.monotonic() - started < 0.15, time.monotonic() - started
    finally:
        server.resume()
    # After open_for, one probe finds Redis back and closes the breaker.
    time.sleep(0.6)
    _until(lambda: cache.get("held") is not None and breaker.state == "closed")
    cache.set("after", "stored")
    assert redis.Redis.from_url(server.url).exists(cache.make_key("after"))


def test_wrong_options_are_refused_by_name(url: str) -> None:
    with pytest.raises(ImproperlyConfigured, match="l1_size"):
        RedisCache(url, {"OPTIONS": {"l1_size": -1}})
    with pytest.raises(ImproperlyConfigured, match="breaker"):
        RedisCache(url, {"OPTIONS": {"breaker": {"threshold": 3}}})


def test_the_cache_instances_of_a_process_share_their_clients(url: str) -> None:
    # Django makes one instance per thread: each thread of a server opening its own pool
    # and wake-up listener would pay for new connections at its first requests.
    mine = RedisCache(url, {"OPTIONS": {"max_connections": 50}})
    others: list[RedisCache] = []
    thread = threading.Thread(
        target=lambda: others.append(RedisCache(url, {"OPTIONS": {"max_connections": 50}}))
    )
    thread.start()
    thread.join()
    other = others[0]
    assert mine.client() is other.client()
    assert RedisCache(url, {"OPTIONS": {"max_connections": 49}}).client() is not mine.client()

    async def async_clients() -> tuple[Any, Any]:
        return mine.async_client(), other.async_client()

    first = asyncio.run(async_clients())
    assert first[0] is first[1]
    second = asyncio.run(async_clients())
    assert second[0] is second[1] and second[0] is not first[0], "a client of a closed loop"
