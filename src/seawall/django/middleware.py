"""Django's cache middleware and cache_page, rendering an expired page once per expiry.

    MIDDLEWARE = [
        "seawall.django.middleware.UpdateCacheMiddleware",
        ...
        "seawall.django.middleware.FetchFromCacheMiddleware",
    ]

    from seawall.django import cache_page

    @cache_page(60)
    def home(request): ...

Django's own middleware reads the page with get() and stores it with set(): when a page
expires, every request that arrives before the first new rendering is stored renders it
too (a stampede on the database behind the view). These subclasses keep Django's keys,
headers and rules (which responses are cached, Vary, HEAD, max-age) and add one step on
a miss: the request takes the page's load lease in Redis (begin_load of
seawall.django.RedisCache) and renders, while the requests that miss with it, in every
process, wait to be woken when its page is stored, then serve that page.

There is one lease per URL (see rendering_key), whatever its Vary headers. A rendering that
cannot be cached (not 200, `Cache-Control: private`, ...) wakes its waiters too; they
then render for themselves, never one after the other. A rendering that dies without a
response (a template that raises while rendering) keeps its lease until it runs out
(OPTIONS["lease"]), and its waiters wait that long at most.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, sync_to_async
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponseBase
from django.middleware import cache as django_cache
from django.utils.cache import _generate_cache_header_key
from django.utils.decorators import decorator_from_middleware_with_args

from seawall.django._woken import FIRST, WOKEN, shared_since
from seawall.shared._concurrency import log, monotonic

__all__ = [
    "CacheMiddleware",
    "FetchFromCacheMiddleware",
    "UpdateCacheMiddleware",
    "cache_page",
]


# request.__dict__[LEASES]: {(cache alias, key prefix): (cache, key, token)}, the page
# leases this request holds. By alias and prefix, which the two halves of the two-class
# setup share: the Update half gives back what the Fetch half took. A second layer with
# the same alias and prefix (the site-wide middleware and a cache_page view) finds the
# lease held by its own request and renders under it, instead of waiting for itself.
LEASES = "_seawall_page_leases"


# Django's cache calls on an event loop: in a worker thread, not in Django's one sync
# thread (thread_sensitive), where a request waiting for a page would hold up the
# response that ends its wait (they touch the cache only, never the database).
def _in_thread(function: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    return sync_to_async(function, thread_sensitive=False)


def rendering_key(key_prefix: str, request: HttpRequest) -> str:
    """The key whose load lease the rendering of the request's URL holds: one per URL
    (whatever its Vary headers), beside Django's key of the URL's header list. No value
    is ever stored under it, so the lease script never answers "it is there": the page
    is looked up again after the lease is taken (the header list and the page are two
    keys, stored one after the other, the page after rendering for a TemplateResponse)."""
    header_key: str = _generate_cache_header_key(key_prefix, request)
    return header_key + ".rendering"


def _leasing_cache(middleware: Any) -> Any:
    cache = middleware.cache
    if not callable(getattr(cache, "begin_load", None)):
        raise ImproperlyConfigured(
            f"seawall.django's cache middleware needs a seawall.django.RedisCache; the cache "
            f"{middleware.cache_alias!r} is {type(cache).__module__}.{type(cache).__qualname__}"
            " (use django.middleware.cache for it, or change its BACKEND)"
        )
    return cache


def _end_load(request: HttpRequest, setup: tuple[str, str]) -> None:
    """Give back the page's lease (if this request holds one) and wake its waiters."""
    held = request.__dict__.get(LEASES, {}).pop(setup, None)
    if held is None:
        return
    cache, key, token = held
    try:
        cache.end_load(key, token)
    except Exception:
        # The lease runs out by itself; its waiters then render for themselves.
        log.exception("cache middleware: giving back the lease of page key %r failed", key)


class UpdateCacheMiddleware(django_cache.UpdateCacheMiddleware):
    """Django's UpdateCacheMiddleware; then the page's lease is given back, after the page
    is stored (after rendering, for a TemplateResponse), waking the requests waiting."""

    def process_response(self, request: HttpRequest, response: HttpResponseBase) -> Any:
        setup = (self.cache_alias, self.key_prefix)
        try:
            response = super().process_response(request, response)
        except BaseException:
            _end_load(request, setup)
            raise
        if setup in request.__dict__.get(LEASES, {}):
            if callable(getattr(response, "render", None)):
                # After Django's own callback that stores the rendered page (run at once
                # if the response is rendered already).
                response.add_post_render_callback(lambda _: _end_load(request, setup))
            else:
                _end_load(request, setup)
        return response

    def process_exception(self, request: HttpRequest, exception: BaseException) -> None:
        # A view decorated with cache_page that raises: no response will come.
        _end_load(request, (self.cache_alias, self.key_prefix))

    async def __acall__(self, request: HttpRequest) -> Any:
        response = await self.get_response(request)
        return await _in_thread(self.process_response)(request, response)


class FetchFromCacheMiddleware(django_cache.FetchFromCacheMiddleware):
    """Django's FetchFromCacheMiddleware; on a miss, one request renders the page and the
    others that miss with it (in every process) wait for it."""

    def process_request(self, request: HttpRequest) -> Any:
        started = monotonic()
        response = self._looked_up(request, started)
        if not self._wants_lease(request, response):
            return response
        cache = _leasing_cache(self)
        key = rendering_key(self.key_prefix, request)
        return self._leased(request, cache, key, cache.begin_load(key), started)

    async def aprocess_request(self, request: HttpRequest) -> Any:
        """process_request for an event loop: Django's lookups (sync) in a worker thread,
        the wait for another request's page on the loop, holding no thread."""
        started = monotonic()
        response = await _in_thread(self._looked_up)(request, started)
        if not self._wants_lease(request, response):
            return response
        cache = _leasing_cache(self)
        key = rendering_key(self.key_prefix, request)
        token = await cache.abegin_load(key)
        return await _in_thread(self._leased)(request, cache, key, token, started)

    def _looked_up(self, request: HttpRequest, started: float) -> Any:
        """Django's lookup, sharing its GETs with the first lookups of this process made
        since `started` (see _woken): a burst of requests for a hot page costs a process
        one GET of each key, not one per request."""
        with shared_since(started, FIRST):
            return super().process_request(request)

    def _wants_lease(self, request: HttpRequest, response: Any) -> bool:
        if response is not None or not getattr(request, "_cache_update_cache", False):
            return False
        # Held already by this request (the site-wide middleware around a cache_page view).
        return (self.cache_alias, self.key_prefix) not in request.__dict__.get(LEASES, {})

    def _leased(
        self, request: HttpRequest, cache: Any, key: str, token: str | None, started: float
    ) -> Any:
        if token is None:
            # Woken: stored meanwhile, or the rendering ended without a page (or this
            # request's Vary headers differ): looked up again, and rendered here if missing.
            # The requests of this process woken with it share the lookup's GETs.
            with shared_since(started, WOKEN):
                return super().process_request(request)
        # Stored by a rendering that ended between the miss and the lease: served, not
        # rendered again.
        response = super().process_request(request)
        if response is not None:
            cache.end_load(key, token)
            return response
        leases = request.__dict__.setdefault(LEASES, {})
        leases[(self.cache_alias, self.key_prefix)] = (cache, key, token)
        return None

    async def __acall__(self, request: HttpRequest) -> Any:
        response = await self.aprocess_request(request)
        return response or await self.get_response(request)


class CacheMiddleware(
    UpdateCacheMiddleware, FetchFromCacheMiddleware, django_cache.CacheMiddleware
):
    """Both in one, as Django's CacheMiddleware (what cache_page wraps a view in); its
    arguments are Django's (cache_timeout, page_timeout, cache_alias, key_prefix)."""

    async def __acall__(self, request: HttpRequest) -> Any:
        response = await self.aprocess_request(request)
        if response is not None:
            return response
        response = await self.get_response(request)
        return await _in_thread(self.process_response)(request, response)


def cache_page(
    timeout: float | None, *, cache: str | None = None, key_prefix: str | None = None
) -> Callable[[Any], Any]:
    """django.views.decorators.cache.cache_page, rendering an expired page once per
    expiry across all processes (the cache must be a seawall.django.RedisCache).

    For an async view the cache is read and written in a worker thread: Django's own
    decorator does it on the event loop, where a request waiting for another's page
    would stop the loop that is rendering it."""
    options = {"page_timeout": timeout, "cache_alias": cache, "key_prefix": key_prefix}
    for_sync_views = decorator_from_middleware_with_args(CacheMiddleware)(**options)

    def decorator(view: Any) -> Any:
        if not iscoroutinefunction(view):
            return for_sync_views(view)
        middleware = CacheMiddleware(view, **options)

        async def cached_view(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
            response = await middleware.aprocess_request(request)
            if response is not None:
                return response
            try:
                response = await view(request, *args, **kwargs)
            except BaseException as exc:
                await _in_thread(middleware.process_exception)(request, exc)
                raise
            if callable(getattr(response, "render", None)):
                # Stored once rendered, as Django's decorator does.
                response.add_post_render_callback(
                    lambda rendered: middleware.process_response(request, rendered)
                )
                return response
            return await _in_thread(middleware.process_response)(request, response)

        return functools.wraps(view)(cached_view)

    return decorator
