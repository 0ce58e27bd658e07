"""get_or_set(key, callable) through seawall.django.RedisCache: one call per expiry, for
every thread of every process that misses the key together. Django's own RedisCache,
in the same harness, runs the callable once per caller in flight."""

from __future__ import annotations

import functools
import time
from typing import Any

import djangoworkers
import redis
from conftest import SPAWN

PROCESSES = 4
THREADS = 25


def _round(pool: Any, url: str, backend: str, **options: Any) -> list[Any]:
    # Every thread of every process calls at the same wall-clock moment, once all the
    # processes have imported Django (the pool's initializer).
    start_at = time.time() + 1.0
    call = functools.partial(djangoworkers.stampede, url, backend, "page:/", THREADS, **options)
    answers = pool.map(call, [start_at] * PROCESSES)
    return [answer for per_process in answers for answer in per_process]


def test_get_or_set_renders_once_per_expiry_across_processes_and_threads(
    seawall_server: Any,
) -> None:
    url = seawall_server.url
    admin = redis.Redis.from_url(url)
    admin.flushdb()
    backend = "seawall.django.RedisCache"
    # Every process imports and configures Django before the first round starts.
    with SPAWN.Pool(PROCESSES, djangoworkers.setup, (url, backend)) as pool:
        for expiry in (1, 2):
            answers = _round(pool, url, backend)
            assert int(admin.get("renders")) == expiry, "the callable ran more than once"
            assert set(answers) == {f"page rendered {expiry}"}, set(answers)
            assert len(answers) == PROCESSES * THREADS
            # The next expiry: the entry goes, as when its timeout passes.
            admin.delete(":1:page:/")
        leftovers = sorted(k.decode() for k in admin.keys("seawall:django:*"))
        assert leftovers == [], "a lease or a waiters set outlived its load"
    admin.close()


def test_djangos_own_redis_backend_renders_once_per_caller_in_flight(seawall_server: Any) -> None:
    url = seawall_server.url
    admin = redis.Redis.from_url(url)
    admin.flushdb()
    backend = "django.core.cache.backends.redis.RedisCache"
    with SPAWN.Pool(PROCESSES, djangoworkers.setup, (url, backend)) as pool:
        # A slow rendering (0.5 s), so that on a loaded machine the callers still arrive
        # while the first one renders: what is shown is the backend's, not the timing's.
        answers = _round(pool, url, backend, render_seconds=0.5)
    renders = int(admin.get("renders"))
    admin.close()
    # All 100 callers miss within a few milliseconds of each other and the render takes
    # 0.5 s: each runs its own (the stampede seawall prevents).
    assert renders > PROCESSES, renders
    assert len(answers) == PROCESSES * THREADS
