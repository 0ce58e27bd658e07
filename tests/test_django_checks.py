"""seawall.django's system checks against a real server, and the warning for sync calls
made on an event loop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import djangoworkers
import pytest
import redis

djangoworkers.setup("redis://unused", "django.core.cache.backends.locmem.LocMemCache")

from django.core.checks import run_checks  # noqa: E402
from django.test import override_settings  # noqa: E402

import seawall.django.checks  # noqa: E402, F401 - registers them, as apps.py's ready() does
from seawall.django import RedisCache  # noqa: E402
from seawall.launcher import pick_free_port  # noqa: E402

ENGINE = "seawall.django.sessions"


def ours(url: str) -> dict[str, Any]:
    return {"BACKEND": "seawall.django.RedisCache", "LOCATION": url}


def ids(**settings: Any) -> list[str]:
    with override_settings(**settings):
        return sorted(m.id for m in run_checks(tags=["sessions"]) if m.id.startswith("seawall"))


@pytest.fixture
def server(seawall_server: Any) -> Iterator[Any]:
    admin = redis.Redis.from_url(seawall_server.url)
    before = admin.config_get("maxmemory-policy")["maxmemory-policy"]
    yield seawall_server
    admin.config_set("maxmemory-policy", before)
    admin.close()


def test_a_session_redis_that_may_evict_sessions_is_reported(server: Any) -> None:
    admin = redis.Redis.from_url(server.url)
    caches = {"default": ours(server.url)}
    admin.config_set("maxmemory-policy", "noeviction")
    assert ids(CACHES=caches, SESSION_ENGINE=ENGINE) == []
    for policy in ("allkeys-lru", "volatile-ttl"):
        admin.config_set("maxmemory-policy", policy)
        assert ids(CACHES=caches, SESSION_ENGINE=ENGINE) == ["seawall.django.W001"]
    # Not our engine: nothing to say.
    assert ids(CACHES=caches, SESSION_ENGINE="django.contrib.sessions.backends.db") == []
    admin.close()


def test_a_session_engine_without_a_seawall_cache_is_an_error() -> None:
    locmem = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    assert ids(CACHES=locmem, SESSION_ENGINE=ENGINE) == ["seawall.django.E001"]


def test_an_unreachable_session_redis_is_reported_without_hanging() -> None:
    url = f"redis://127.0.0.1:{pick_free_port()}/0"  # nothing listens there
    assert ids(CACHES={"default": ours(url)}, SESSION_ENGINE=ENGINE) == ["seawall.django.W002"]


def test_a_sync_call_on_an_event_loop_is_logged_once(
    seawall_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    cache = RedisCache(seawall_server.url, {})

    async def view() -> None:
        cache.set("a", 1)
        cache.get("a")
        await cache.aget("a")

    with caplog.at_level(logging.WARNING, logger="seawall"):
        asyncio.run(view())
        cache.get("a")  # not on a loop: nothing to say
    warned = [r for r in caplog.records if "running event loop" in r.getMessage()]
    assert len(warned) == 1
    assert "await its a* twin" in warned[0].getMessage()
