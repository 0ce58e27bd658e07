"""OPTIONS["stale_ttl"] of seawall.django.RedisCache, against a real server: when a value
expires, the callers of get_or_set() that would wait for the caller reloading it get the
value before instead (the stale copy its last write-back left), and nothing else changes:
get() still misses, the reloading caller still runs its callable, and every other write
drops the stale copy, so no caller ever gets a value older than the last write."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import djangoworkers
import pytest
import redis

djangoworkers.setup("redis://unused", "django.core.cache.backends.locmem.LocMemCache")

from seawall.django import RedisCache  # noqa: E402
from seawall.django._keys import flight_keys, stale_key  # noqa: E402

# A short lease: a waiter that wrongly waits fails in seconds (wait_timeout = 2 x lease).
OPTIONS = {"stale_ttl": 60.0, "lease": 2.0}


@pytest.fixture
def cache(seawall_url: str) -> Iterator[RedisCache]:
    yield RedisCache(seawall_url, {"OPTIONS": OPTIONS})


def _stale_held(cache: RedisCache, key: str) -> bool:
    return bool(cache.client().exists(stale_key(cache.make_key(key))))


def _expire(cache: RedisCache, key: str) -> None:
    """What the value's expiry does: the value goes, its stale copy stays."""
    cache.client().delete(cache.make_key(key))


class Loading:
    """A get_or_set() in a thread whose callable holds until release()."""

    def __init__(self, cache: RedisCache, key: str, value: Any) -> None:
        self.started, self._release, self.result = threading.Event(), threading.Event(), []

        def load() -> Any:
            self.started.set()
            assert self._release.wait(10)
            return value

        self.thread = threading.Thread(
            target=lambda: self.result.append(cache.get_or_set(key, load, 300))
        )
        self.thread.start()
        assert self.started.wait(10), "the loader never ran"

    def release(self) -> Any:
        self._release.set()
        self.thread.join(10)
        return self.result[0]


def _never() -> Any:
    raise AssertionError("a waiter ran the callable while another caller loads")


def test_a_waiter_gets_the_stale_copy_while_the_value_reloads(cache: RedisCache) -> None:
    assert cache.get_or_set("k", lambda: "v1", 300) == "v1"
    assert _stale_held(cache, "k")
    _expire(cache, "k")
    assert cache.get("k") is None, "get() must miss, as Django's does"
    assert not cache.has_key("k")
    loading = Loading(cache, "k", "v2")
    assert cache.get_or_set("k", _never, 300) == "v1"  # at once: no wait for the load
    assert loading.release() == "v2", "the caller that reloads gets its own value"
    assert cache.get("k") == "v2"
    _expire(cache, "k")
    loading = Loading(cache, "k", "v3")
    assert cache.get_or_set("k", _never, 300) == "v2", "the copy of the last write-back"
    loading.release()


def test_a_write_after_the_write_back_is_never_undone_by_its_stale_copy(
    cache: RedisCache, seawall_url: str
) -> None:
    assert cache.get_or_set("k", lambda: "v1", 300) == "v1"
    cache.set("k", "v2", 300)  # newer than the stale copy: drops it
    _expire(cache, "k")
    loading = Loading(cache, "k", "v3")
    answers: list[Any] = []
    waiter = threading.Thread(target=lambda: answers.append(cache.get_or_set("k", _never, 300)))
    waiter.start()
    # It waits for the load (queued among the waiters) instead of answering "v1".
    admin = redis.Redis.from_url(seawall_url)
    waiters = flight_keys(cache.make_key("k"))[2]
    deadline = time.monotonic() + 10
    while not admin.scard(waiters):
        assert time.monotonic() < deadline and not answers, answers
        time.sleep(0.005)
    assert loading.release() == "v3"
    waiter.join(10)
    assert answers == ["v3"]
    admin.close()


WRITES: dict[str, Callable[[RedisCache], Any]] = {
    "set": lambda c: c.set("k", "new"),
    "set timeout 0": lambda c: c.set("k", "new", 0),
    "add": lambda c: (_expire(c, "k"), c.add("k", "new")),
    "set_many": lambda c: c.set_many({"k": "new"}),
    "delete": lambda c: c.delete("k"),
    "delete_many": lambda c: c.delete_many(["k"]),
    "touch timeout 0": lambda c: c.touch("k", 0),
    "incr": lambda c: c.incr("k"),
    "clear": lambda c: c.clear(),
}


@pytest.mark.parametrize("write", list(WRITES))
def test_every_other_write_drops_the_stale_copy(cache: RedisCache, write: str) -> None:
    assert cache.get_or_set("k", lambda: 5, 300) == 5
    assert _stale_held(cache, "k")
    WRITES[write](cache)
    assert not _stale_held(cache, "k")


def test_no_stale_copy_without_the_option(seawall_url: str) -> None:
    cache = RedisCache(seawall_url, {})
    assert cache.get_or_set("k", lambda: "v1", 300) == "v1"
    assert not _stale_held(cache, "k")


def test_no_stale_copy_of_a_value_kept_for_ever(cache: RedisCache) -> None:
    assert cache.get_or_set("k", lambda: "v1", None) == "v1"
    assert not _stale_held(cache, "k")


def test_aget_or_set_gets_the_stale_copy_too(cache: RedisCache) -> None:
    async def scenario() -> None:
        assert await cache.aget_or_set("k", lambda: "v1", 300) == "v1"
        _expire(cache, "k")
        started, release = asyncio.Event(), asyncio.Event()

        async def slow() -> str:
            started.set()
            await release.wait()
            return "v2"

        loading = asyncio.ensure_future(cache.aget_or_set("k", slow, 300))
        await asyncio.wait_for(started.wait(), 10)
        assert await cache.aget_or_set("k", _never, 300) == "v1"
        release.set()
        assert await loading == "v2"

    asyncio.run(scenario())


def test_stale_ttl_must_be_seconds(seawall_url: str) -> None:
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(ImproperlyConfigured, match="stale_ttl"):
        RedisCache(seawall_url, {"OPTIONS": {"stale_ttl": "1m"}})
