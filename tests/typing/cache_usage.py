"""Checked by mypy --strict in tests/test_cache_typing.py; never run."""

from __future__ import annotations

from typing import assert_type

import redis
import redis.asyncio

import seawall
import seawall.aio


def sync_use(client: redis.Redis) -> None:
    cache = seawall.Cache(client, "typed")
    assert_type(cache.get_or_load("k", lambda: 3), int)
    assert_type(cache.get_or_load("k", lambda: None if client else "x"), str | None)
    assert_type(
        cache.get_or_load_many([1, 2], lambda keys: {k: str(k) for k in keys}),
        dict[int, str | None],
    )
    assert_type(cache.stats().hit_rate, float)
    assert_type(cache.get_or_load("k", lambda: [1], 5.0, tags=["t"]), list[int])
    assert_type(cache.delete_tag("t"), int)

    @cache.cached(ttl=10, tags=["t"])
    def double(x: int) -> int:
        return 2 * x

    assert_type(double(3), int)
    assert_type(double.get(3), int | None)


async def async_use(client: redis.asyncio.Redis) -> None:
    cache = seawall.aio.Cache(client, "typed")

    async def load() -> bytes:
        return b""

    async def load_many(keys: list[str]) -> dict[str, int]:
        return {}

    assert_type(await cache.get_or_load("k", load), bytes)
    assert_type(await cache.get_or_load("k", lambda: 1.5), float)
    assert_type(await cache.get_or_load_many(["a"], load_many), dict[str, int | None])

    @cache.cached(key="n:{n}")
    async def fetch(n: int) -> str:
        return str(n)

    @cache.cached()
    def plain(n: int) -> bytes:
        return b""

    assert_type(await fetch(1), str)
    assert_type(await plain(1), bytes)


def mistakes(client: redis.Redis, aclient: redis.asyncio.Redis) -> None:
    seawall.aio.Cache(client, "wrong")  # MISTAKE: a sync client for the asyncio cache
    seawall.Cache(aclient, "wrong")  # MISTAKE: an asyncio client for the sync cache
    text: str = seawall.Cache(client, "n").get_or_load("k", lambda: 1)  # noqa: F841 # MISTAKE: int
    seawall.Cache(client, "n").get_or_load(("a", 1), lambda: 1)  # MISTAKE: a tuple key
    seawall.Cache(client, "n").get_or_load("k", lambda: 1, tags=[1])  # MISTAKE: tag not str

    @seawall.Cache(client, "n").cached()
    def triple(x: int) -> int:
        return 3 * x

    triple("3")  # MISTAKE: the wrapped function's parameters are checked
