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
            ALLOWED_HOSTS=["*"],
            # seawall.django for its template tags ({% load seawall_cache %}).
            INSTALLED_APPS=["seawall.django"],
            TEMPLATES=[{"BACKEND": "django.template.backends.django.DjangoTemplates"}],
        )
        django.setup()


def _render_page(request: Any) -> Any:
    from django.http import HttpResponse

    n = _counter.incr("renders")
    time.sleep(_render_seconds)
    return HttpResponse(f"page rendered {n}")


_counter: Any = None
_render_seconds = RENDER_SECONDS
_views: dict[str, Any] = {}


def _page_view(which: str) -> Any:
    """The page view under seawall's cache_page or Django's."""
    if which not in _views:
        if which == "seawall":
            from seawall.django import cache_page
        else:
            from django.views.decorators.cache import cache_page
        _views[which] = cache_page(60)(_render_page)
    return _views[which]


def _fragment_template(which: str) -> Any:
    from django.template import engines

    library = "seawall_cache" if which == "seawall" else "cache"
    source = f"{{% load {library} %}}{{% cache 60 sidebar %}}{{{{ render }}}}{{% endcache %}}"
    return engines["django"].from_string(source)


def race(
    url: str,
    backend: str,
    what: str,
    threads: int,
    start_at: float,
    render_seconds: float = RENDER_SECONDS,
) -> list[Any]:
    """`threads` threads request a cached page ("page:seawall", "page:django": under
    seawall's or Django's cache_page) or render a template's cached fragment
    ("fragment:seawall", "fragment:django": {% load seawall_cache %} or Django's tag)
    at wall-clock `start_at`. Each rendering takes `render_seconds` and counts itself in
    Redis ("renders"). Their answers (the page's or the fragment's text)."""
    global _counter, _render_seconds
    _render_seconds = render_seconds
    from django.core.cache import cache
    from django.test import RequestFactory

    setup(url, backend)
    if _counter is None:
        import redis

        _counter = redis.Redis.from_url(url)
    kind, which = what.split(":")
    cache.get("warm-up")  # connect before the start, as a serving worker would have
    view = _page_view(which) if kind == "page" else None
    template = _fragment_template(which) if kind == "fragment" else None
    answers: list[Any] = [None] * threads

    def render_fragment() -> str:
        return str(_render_page(None).content.decode())

    def call(i: int) -> None:
        request = RequestFactory().get("/page/")
        time.sleep(max(0.0, start_at - time.time()))
        if view is not None:
            answers[i] = view(request).content.decode()
        else:
            answers[i] = template.render({"render": render_fragment})

    workers = [threading.Thread(target=call, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return answers


def stampede(
    url: str,
    backend: str,
    key: str,
    threads: int,
    start_at: float,
    render_seconds: float = RENDER_SECONDS,
) -> list[Any]:
    """`threads` threads call cache.get_or_set(key, render) at wall-clock `start_at`;
    render takes `render_seconds` and counts itself in Redis ("renders"). Their answers."""
    import redis
    from django.core.cache import cache

    setup(url, backend)
    counter = redis.Redis.from_url(url)
    cache.get("warm-up")  # connect before the start, as a serving worker would have
    answers: list[Any] = [None] * threads

    def render() -> str:
        n = counter.incr("renders")
        time.sleep(render_seconds)
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


def l1_reader(url: str, options: dict[str, Any], inbox: Any, outbox: Any) -> None:
    """A process with its own seawall.django.RedisCache (OPTIONS `options`) doing what
    `inbox` says: ("fill", key, value) reads `key` until it is `value` and held in this
    process's L1, then answers True; ("read", key, seconds) reads it for that long and
    answers every distinct value seen; ("until", key, value, seconds) reads it until it
    is `value` and answers the wall-clock time it was (None: it never was); None ends."""
    setup(url, "django.core.cache.backends.locmem.LocMemCache")
    from seawall.django import RedisCache
    from seawall.django._local import MISSING

    cache = RedisCache(url, {"OPTIONS": options})
    local = cache._x.local()
    assert local is not None
    while (order := inbox.get()) is not None:
        verb, key, *rest = order
        deadline = time.monotonic() + 10.0
        if verb == "fill":
            while not (cache.get(key) == rest[0] and local.get(cache.make_key(key)) is not MISSING):
                if time.monotonic() > deadline:
                    break
                time.sleep(0.005)
            outbox.put(time.monotonic() <= deadline)
        elif verb == "read":
            seen: list[Any] = []
            end = time.monotonic() + rest[0]
            while time.monotonic() < end:
                value = cache.get(key)
                if value not in seen:
                    seen.append(value)
                time.sleep(0.001)
            outbox.put(seen)
        else:
            end = time.monotonic() + rest[1]
            when = None
            while time.monotonic() < end:
                if cache.get(key) == rest[0]:
                    when = time.time()
                    break
            outbox.put(when)
