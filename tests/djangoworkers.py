"""Processes of the Django tests: each configures Django with one cache and calls it from
many threads at once (spawned, so each has its own Django, pools and wake-up listener)."""

from __future__ import annotations

import threading
import time
from typing import Any

RENDER_SECONDS = 0.05


def setup(url: str, backend: str) -> None:
    import django
    from django.conf import settings

    if not settings.configured:
        settings.configure(
            SECRET_KEY="seawall-tests",
            CACHES={"default": {"BACKEND": backend, "LOCATION": url}},
            USE_TZ=True,
        )
        django.setup()


def stampede(url: str, backend: str, key: str, threads: int, start_at: float) -> list[Any]:
    """`threads` threads call cache.get_or_set(key, render) at wall-clock `start_at`;
    render takes RENDER_SECONDS and counts itself in Redis ("renders"). Their answers."""
    import redis
    from django.core.cache import cache

    setup(url, backend)
    counter = redis.Redis.from_url(url)
    cache.get("warm-up")  # connect before the start, as a serving worker would have
    answers: list[Any] = [None] * threads

    def render() -> str:
        n = counter.incr("renders")
        time.sleep(RENDER_SECONDS)
        return f"page rendered {n}"

    def call(i: int) -> None:
        time.sleep(max(0.0, start_at - time.time()))
        answers[i] = cache.get_or_set(key, render, timeout=60)

    workers = [threading.Thread(target=call, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    counter.close()
    return answers
