"""What seawall.django.RedisCache keeps right beyond Django's own tests (which
test_django_suites.py runs): single flight, a delete voiding a load, atomic incr, a clear
of its own keys, Django's storage format, Cluster, clear configuration errors."""

from __future__ import annotations

import asyncio
import threading
import time
import warnings
from collections.abc import Iterator
from typing import Any

import djangoworkers
import pytest
import redis

djangoworkers.setup("redis://unused", "django.core.cache.backends.locmem.LocMemCache")

from django.core.cache.backends.redis import RedisCache as DjangosRedisCache  # noqa: E402
from django.core.exceptions import ImproperlyConfigured  # noqa: E402

from seawall.django import NotAnInteger, RedisCache  # noqa: E402


@pytest.fixture
def url(seawall_server: Any) -> Iterator[str]:
    admin = redis.Redis.from_url(seawall_server.url)
    admin.flushdb()
    admin.close()
    yield seawall_server.url


def make(url: str, **options: Any) -> RedisCache:
    return RedisCache(url, {"OPTIONS": options})


def test_a_callable_that_raises_hands_the_load_to_a_waiter(url: str) -> None:
    cache = make(url)
    started = threading.Event()
    results: dict[str, Any] = {}

    def failing() -> str:
        started.set()
        time.sleep(0.05)
        raise RuntimeError("database down")

    def first() -> None:
        try:
            cache.get_or_set("k", failing)
        except RuntimeError as exc:
            results["first"] = exc

    thread = threading.Thread(target=first)
    thread.start()
    started.wait(5)
    # Queued behind the failing load, then woken by its give-back: runs its own callable.
    results["second"] = cache.get_or_set("k", lambda: "loaded by the waiter")
    thread.join()
    assert isinstance(results["first"], RuntimeError)
    assert results["second"] == "loaded by the waiter"
    assert cache.get("k") == "loaded by the waiter"


def test_a_delete_during_a_load_voids_its_write_back(url: str) -> None:
    cache = make(url)
    loading, go_on = threading.Event(), threading.Event()
    answer: list[Any] = []

    def slow_read() -> str:
        loading.set()
        go_on.wait(5)
        return "read before the delete"

    thread = threading.Thread(target=lambda: answer.append(cache.get_or_set("k", slow_read)))
    thread.start()
    loading.wait(5)
    cache.delete("k")  # the row changed: whatever the load read is older
    go_on.set()
    thread.join()
    assert answer == ["read before the delete"]  # its caller still gets an answer
    assert cache.get("k") is None  # but the cache does not keep it


def test_timeout_none_stores_for_ever_and_zero_stores_nothing(url: str) -> None:
    cache = make(url)
    client = cache.client()
    assert cache.get_or_set("forever", lambda: 1, timeout=None) == 1
    assert client.ttl(":1:forever") == -1
    assert cache.get_or_set("never", lambda: 2, timeout=0) == 2
    assert not client.exists(":1:never")
    assert cache.get_or_set("usual", lambda: 3, timeout=30) == 3
    assert 0 < client.pttl(":1:usual") <= 30_000


def test_incr_is_one_step_and_keeps_the_expiry(url: str) -> None:
    cache = make(url)
    cache.set("n", 1, timeout=30)
    assert cache.incr("n", 4) == 5
    assert cache.decr("n") == 4
    assert 0 < cache.client().pttl(":1:n") <= 30_000
    with pytest.raises(ValueError, match="not found"):
        cache.incr("missing")
    assert not cache.client().exists(":1:missing")
    cache.set("text", "abc")
    with pytest.raises(NotAnInteger, match="':1:text'") as raised:
        cache.incr("text")
    # Both what Django's other backends raise and what Django's RedisCache raises.
    assert isinstance(raised.value, TypeError)
    assert isinstance(raised.value, redis.exceptions.ResponseError)


def test_clear_deletes_this_caches_keys_only(url: str) -> None:
    cache = make(url)
    other = RedisCache(url, {"KEY_PREFIX": "other"})
    client = cache.client()
    client.set("seawall:session:{abcd}:x", "a session")
    for i in range(1200):  # more than one SCAN batch and one UNLINK batch
        cache.set(f"k{i}", i)
    other.set("k", "kept")
    cache.clear()
    assert cache.get_many([f"k{i}" for i in range(1200)]) == {}
    assert other.get("k") == "kept"
    assert client.get("seawall:session:{abcd}:x") == b"a session"


def test_entries_are_djangos_own_format_both_ways(url: str) -> None:
    ours = make(url)
    djangos = DjangosRedisCache(url, {})
    ours.set("int", 41)
    ours.set("obj", {"a": [1, 2]})
    assert ours.client().get(":1:int") == b"41"
    assert djangos.get("int") == 41 and djangos.incr("int") == 42
    assert djangos.get("obj") == {"a": [1, 2]}
    djangos.set("theirs", ("t", 1))
    assert ours.get("theirs") == ("t", 1)
    assert ours.incr("int") == 43


def test_json_serializer_keeps_ints_as_digits(url: str) -> None:
    cache = make(url, serializer="json")
    cache.set("n", 5)
    cache.set("doc", {"a": 1})
    assert cache.client().get(":1:doc") == b'{"a":1}'
    assert cache.incr("n") == 6 and cache.get("doc") == {"a": 1}


@pytest.mark.parametrize(
    ("option", "instead"),
    [("SOCKET_TIMEOUT", "'socket_timeout'"), ("CLIENT_CLASS", "no equivalent")],
)
def test_a_django_redis_option_is_refused_naming_what_to_write(option: str, instead: str) -> None:
    with pytest.raises(ImproperlyConfigured, match=f"{option}.*django-redis.*{instead}"):
        RedisCache("redis://localhost", {"OPTIONS": {option: 1}})


def test_max_entries_is_refused_saying_redis_bounds_memory_itself() -> None:
    with pytest.raises(ImproperlyConfigured, match="maxmemory"):
        RedisCache("redis://localhost", {"OPTIONS": {"MAX_ENTRIES": 30}})


def test_key_warnings_are_djangos(url: str) -> None:
    cache = make(url)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cache.set("key with spaces", 1)
    assert "key with spaces" in str(caught[0].message)


def test_async_get_or_set_runs_an_async_callable_once_for_all_tasks(url: str) -> None:
    cache = make(url)
    calls = 0

    async def render() -> str:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.05)
        return "page"

    async def main() -> list[Any]:
        return await asyncio.gather(*(cache.aget_or_set("p", render) for _ in range(30)))

    assert asyncio.run(main()) == ["page"] * 30
    assert calls == 1
    assert cache.get("p") == "page"


def test_cluster(seawall_cluster: Any) -> None:
    seawall_cluster.flushall()
    cache = RedisCache(seawall_cluster.url, {"OPTIONS": {"cluster": True}})
    keys = [f"k{i}" for i in range(50)]  # spread over many slots
    cache.set_many({key: i for i, key in enumerate(keys)})
    assert cache.get_many(keys) == {key: i for i, key in enumerate(keys)}
    assert cache.get_or_set("{odd}}", lambda: "x") == "x"  # a key with braces of its own
    assert cache.get_or_set("}{", lambda: "y") == "y"
    assert cache.incr("k3") == 4
    cache.delete_many(keys[:10])
    assert cache.get_many(keys[:10]) == {}
    cache.clear()
    assert cache.get_many(keys) == {}

    async def both() -> tuple[Any, Any]:
        await cache.aset("a", 1)
        return await cache.aget("a"), await cache.aget_or_set("b", lambda: 2)

    assert asyncio.run(both()) == (1, 2)
