"""Hot keys: found per process, served from memory when L1 is off, published for the CLI."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from conftest import Target
from waiting import wait_until

import seawall
import seawall.aio
from seawall.cache._hotkeys import HotKeys


def gets(r: Any) -> int:
    stats = r.info("commandstats")
    return sum(
        int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in ("get", "mget", "evalsha")
    )


def test_a_hot_key_is_served_from_memory_when_l1_is_off(target: Target) -> None:
    r = target.sync()
    cache = seawall.Cache(r, "hot", ttl=60, l1_size=0)
    listener = cache._listener()  # hot keys are held only while invalidations are heard
    assert listener is not None and listener.wait_listening(10)
    cache.set("hot", "h")
    cache.set("cold", "c")
    for _ in range(400):
        assert cache.get_or_load("hot", lambda: "never") == "h"
    # One read: it can be sampled once at most, never twice (the sampling gaps are random,
    # so five reads were sampled twice, and made hot, in about 1 run in 14).
    assert cache.get_or_load("cold", lambda: "never") == "c"
    stats = cache.stats()
    # Hot after two sampled reads (one read in 16 is sampled), then served from memory.
    assert stats.l1_hits >= 250, stats
    held = set(cache.l1._entries)
    assert held == {cache._key("hot")}, held  # only the hot key is held
    assert cache.hot_keys(1)[0][0] == cache._key("hot")

    # Another process's write reaches the copy held in memory, as it reaches any L1.
    seawall.Cache(target.sync(), "hot", ttl=60, hot_keys=0).set("hot", "h2")
    wait_until(
        lambda: cache.get_or_load("hot", lambda: "never") == "h2", 2, "the hot key's new value"
    )
    # And a write of our own replaces it at once.
    cache.set("hot", "h3")
    assert cache.get_or_load("hot", lambda: "never") == "h3"


def test_hot_keys_cut_redis_reads_and_hot_keys_0_turns_it_off(standalone: Target) -> None:
    r = standalone.sync()
    for hot_keys, bound in ((256, 0.6), (0, 1.0)):
        cache = seawall.Cache(r, f"cut-{hot_keys}", ttl=60, l1_size=0, hot_keys=hot_keys)
        listener = cache._listener()
        if hot_keys:
            assert listener is not None and listener.wait_listening(10)
        else:
            assert listener is None and cache.hot_keys() == []
            # No L1, but a listener still runs: it carries the namespace's generation
            # (Cache.clear()), and reads ask Redis for it only until it subscribes.
            assert cache._invalidator_here().wait_listening(10)
        for i in range(10):
            cache.set(i, i)
        r.config_resetstat()
        for _ in range(100):
            for i in range(10):
                cache.get_or_load(i, lambda: "never")
        reads = gets(r)
        if hot_keys:
            assert reads <= bound * 1000, reads
        else:
            assert reads == 1000


def test_asyncio_caches_hold_hot_keys_too(target: Target) -> None:
    async def body() -> None:
        r = target.aio()
        cache = seawall.aio.Cache(r, "hot-aio", ttl=60, l1_size=0)
        await cache.set("k", "v")
        listener = cache._listener()
        assert listener is not None and await listener.wait_listening(10)
        for _ in range(300):
            assert await cache.get_or_load("k", lambda: "never") == "v"
        assert cache.stats().l1_hits >= 150
        await cache.delete("k")
        assert await cache.get("k") is None
        await r.aclose()

    asyncio.run(body())


def test_top_keys_are_published_for_seawall_hotkeys(standalone: Target) -> None:
    r = standalone.sync()
    cache = seawall.Cache(r, "published", ttl=60)
    cache._hot = HotKeys(256, sample_every=1, half_life=0.2)  # publish within the test
    cache.set("a", 1)
    cache.set("b", 2)
    published: list[str] = []

    def seen() -> bool:
        for _ in range(20):
            cache.get("a")
        cache.get("b")
        published[:] = [k.decode() for k in r.keys("seawall:hotkeys:*")]
        return bool(published)

    wait_until(seen, 5, "the hot key is seen")
    [key] = published
    assert key.startswith("seawall:hotkeys:{published}:")
    ranked = r.zrevrange(key, 0, -1, withscores=True)
    assert ranked[0][0].decode() == cache._key("a")
    assert 0 < r.pttl(key) <= 600  # 3 half-lives: gone when the process stops publishing


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"hot_keys": -1}, ValueError, "hot_keys"),
        ({"hot_keys": True}, ValueError, "hot_keys"),
        ({"breaker": True}, TypeError, "CircuitBreaker"),
        ({"loader_limit": 5}, TypeError, "RateLimiter"),
    ],
)
def test_bad_options_are_refused(
    standalone: Target, options: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        seawall.Cache(standalone.sync(), "bad", **options)
