"""cache_page, the cache middleware and {% cache %} through seawall.django: an expired page
or fragment is rendered once, whoever asks for it and in however many processes; with
Django's own cache_page, tag and RedisCache, in the same harness, once per request in
flight."""

from __future__ import annotations

import functools
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
from django.http import HttpResponse  # noqa: E402
from django.template import engines  # noqa: E402
from django.template.response import TemplateResponse  # noqa: E402
from django.test import RequestFactory, override_settings  # noqa: E402

from seawall.django import cache_page  # noqa: E402
from seawall.django.middleware import (  # noqa: E402
    FetchFromCacheMiddleware,
    UpdateCacheMiddleware,
)

PROCESSES = 4
THREADS = 50
SEAWALL = "seawall.django.RedisCache"
DJANGOS = "django.core.cache.backends.redis.RedisCache"
# The lease of the tests in this process. Long, so that a request that waited for it would
# take far longer than the bounds below (BOUND), which leave room for a machine that
# stalls for many seconds under the rest of the suite.
LEASE = 120.0
BOUND = 40.0


class _Pools:
    """One pool of PROCESSES processes per cache backend, started when first asked for and
    shared by the module's tests: a spawned process that imports Django costs about a
    second of CPU, and the tests' state is in Redis (flushed by each), not in the pools."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.started: dict[str, Any] = {}

    def __call__(self, backend: str) -> Any:
        if backend not in self.started:
            self.started[backend] = SPAWN.Pool(PROCESSES, djangoworkers.setup, (self.url, backend))
        return self.started[backend]

    def close(self) -> None:
        for pool in self.started.values():
            pool.terminate()
            pool.join()


@pytest.fixture(scope="module")
def pools(seawall_server: Any) -> Iterator[_Pools]:
    started = _Pools(seawall_server.url)
    yield started
    started.close()


def _round(pool: Any, url: str, backend: str, what: str, **options: Any) -> list[Any]:
    # Every thread of every process asks at the same wall-clock moment.
    start_at = time.time() + 1.0
    call = functools.partial(djangoworkers.race, url, backend, what, THREADS, **options)
    answers = pool.map(call, [start_at] * PROCESSES)
    return [answer for per_process in answers for answer in per_process]


def _page_keys(admin: redis.Redis) -> dict[str, list[bytes]]:
    keys = admin.keys(":1:views.decorators.cache.*")
    return {
        "pages": [k for k in keys if b".cache_page." in k],
        "headers": [k for k in keys if b".cache_header." in k],
    }


def test_an_expired_page_is_rendered_once_across_processes(pools: _Pools) -> None:
    admin = redis.Redis.from_url(pools.url)
    admin.flushdb()
    pool = pools(SEAWALL)
    # 1: never rendered; 2: the page expired, its Vary headers still known (the lease is
    # on the page's key); 3: both expired (the lease is on the header list's key).
    for expiry in (1, 2, 3):
        answers = _round(pool, pools.url, SEAWALL, "page:seawall")
        assert int(admin.get("renders")) == expiry, "the page was rendered more than once"
        assert set(answers) == {f"page rendered {expiry}"}, set(answers)
        assert len(answers) == PROCESSES * THREADS
        keys = _page_keys(admin)
        assert len(keys["pages"]) == 1 and len(keys["headers"]) == 1, keys
        admin.delete(*keys["pages"])
        if expiry == 2:
            admin.delete(*keys["headers"])
    assert admin.keys("seawall:django:*") == [], "a lease or a waiters set outlived its page"
    admin.close()


def test_djangos_cache_page_renders_once_per_request_in_flight(pools: _Pools) -> None:
    admin = redis.Redis.from_url(pools.url)
    admin.flushdb()
    # A slow rendering (0.5 s), so that on a loaded machine the requests still arrive
    # while the first ones render: what is shown is the backend's, not the timing's.
    answers = _round(pools(DJANGOS), pools.url, DJANGOS, "page:django", render_seconds=0.5)
    renders = int(admin.get("renders"))
    admin.close()
    # All 200 requests miss within milliseconds of each other and a rendering takes
    # 0.5 s: far more than one per process renders.
    assert renders > PROCESSES, renders
    assert len(answers) == PROCESSES * THREADS


def test_a_fragment_is_rendered_once_across_processes(pools: _Pools) -> None:
    admin = redis.Redis.from_url(pools.url)
    admin.flushdb()
    answers = _round(pools(SEAWALL), pools.url, SEAWALL, "fragment:seawall")
    assert int(admin.get("renders")) == 1
    assert set(answers) == {"page rendered 1"}
    admin.flushdb()
    _round(pools(DJANGOS), pools.url, DJANGOS, "fragment:django", render_seconds=0.5)
    # Its threads miss together: more than one rendering (how many depends on how
    # closely they start on a loaded machine, so only "more than one" is asserted; a
    # 0.5 s rendering leaves them time to).
    assert int(admin.get("renders")) > 1, "Django's tag rendered only once"
    admin.close()


# --- in this process: threads, one server -------------------------------------------


@pytest.fixture
def url(seawall_server: Any) -> Iterator[str]:
    admin = redis.Redis.from_url(seawall_server.url)
    admin.flushdb()
    admin.close()
    backend = {"BACKEND": SEAWALL, "LOCATION": seawall_server.url, "OPTIONS": {"lease": LEASE}}
    with override_settings(CACHES={"default": backend}):
        yield seawall_server.url


def _together(threads: int, call: Any) -> tuple[list[Any], float]:
    """`threads` threads run call() at once: what each returned or raised, and the
    seconds until the last one was done."""
    results: list[Any] = [None] * threads
    barrier = threading.Barrier(threads)

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = call()
        except Exception as exc:
            results[i] = exc

    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    started = time.monotonic()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return results, time.monotonic() - started


def _counting(body: Any) -> tuple[Any, list[int]]:
    renders: list[int] = []

    def view(request: Any) -> Any:
        renders.append(1)
        return body(request)

    return view, renders


def test_a_view_that_raises_wakes_its_waiters_at_once(url: str) -> None:
    def failing(request: Any) -> Any:
        time.sleep(0.05)
        raise RuntimeError("database down")

    view, renders = _counting(failing)
    cached = cache_page(60)(view)
    results, seconds = _together(10, lambda: cached(RequestFactory().get("/")))
    assert all(isinstance(result, RuntimeError) for result in results), results
    # The waiters were woken by the failure and rendered for themselves, without waiting
    # for the lease to run out.
    assert len(renders) == 10
    assert seconds < BOUND, seconds


def test_a_response_that_cannot_be_cached_lets_its_waiters_render_together(url: str) -> None:
    def private(request: Any) -> Any:
        time.sleep(1.0)
        response = HttpResponse("yours only")
        response["Cache-Control"] = "private"
        return response

    view, renders = _counting(private)
    cached = cache_page(60)(view)
    results, seconds = _together(10, lambda: cached(RequestFactory().get("/")))
    assert [r.content for r in results] == [b"yours only"] * 10
    assert len(renders) == 10
    # The leader's 1 s, then the nine others at once (2 s in all): one after the other
    # would be 10 s, and a wait for the lease 120 s.
    assert seconds < 6.0, seconds


def test_a_template_response_is_stored_before_its_waiters_wake(url: str) -> None:
    template = engines["django"].from_string("rendered {{ n }}")

    def page(request: Any) -> Any:
        time.sleep(0.05)
        return TemplateResponse(request, template, {"n": len(renders)})

    view, renders = _counting(page)
    cached = cache_page(60)(view)

    def get() -> bytes:
        response = cached(RequestFactory().get("/"))
        if hasattr(response, "render"):
            response.render()
        return bytes(response.content)

    results, _ = _together(20, get)
    assert results == [b"rendered 1"] * 20
    assert len(renders) == 1


def test_an_async_view_waits_off_the_event_loop(url: str) -> None:
    import asyncio

    renders: list[int] = []

    async def page(request: Any) -> Any:
        renders.append(1)
        await asyncio.sleep(0.05)
        return HttpResponse(f"async {len(renders)}")

    cached = cache_page(60)(page)

    async def main() -> list[Any]:
        return await asyncio.gather(*(cached(RequestFactory().get("/")) for _ in range(10)))

    # On one event loop: a waiter blocking the loop would stop the leader's rendering
    # until the lease ran out.
    started = time.monotonic()
    responses = asyncio.run(main())
    assert [r.content for r in responses] == [b"async 1"] * 10
    assert len(renders) == 1
    assert time.monotonic() - started < BOUND


def test_the_two_middleware_classes_and_cache_page_share_one_lease(url: str) -> None:
    """Site-wide middleware around a cache_page view, same cache and prefix: the view's
    decorator finds the lease its own request holds, instead of waiting for itself."""
    view, renders = _counting(lambda request: HttpResponse("both"))
    inner = cache_page(60)(view)
    with override_settings(CACHE_MIDDLEWARE_SECONDS=60):
        # MIDDLEWARE = [Update..., Fetch...]: Update outermost, Fetch next to the view.
        stack = UpdateCacheMiddleware(FetchFromCacheMiddleware(inner))
        started = time.monotonic()
        first = stack(RequestFactory().get("/"))
        second = stack(RequestFactory().get("/"))
    assert time.monotonic() - started < BOUND
    assert first.content == second.content == b"both"
    assert len(renders) == 1


def test_another_backend_is_refused_by_name(url: str) -> None:
    locmem = {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    with override_settings(CACHES={"default": locmem}):
        cached = cache_page(60)(lambda request: HttpResponse("x"))
        with pytest.raises(ImproperlyConfigured, match=r"needs a seawall\.django\.RedisCache"):
            cached(RequestFactory().get("/"))
