"""pytest plugin that runs dogpile.cache's own decorator tests with seawall's decorator.

Loaded by test_cache_peer_suite.py (`-p dogpilesuite_plugin`) into a pytest run of
tests/cache/test_decorator.py from dogpile.cache's sdist (its dogpile/ beside it, so tests
and library are of one release). dogpile's tests are not changed; the plugin:

- appends $SEAWALL_DOGPILE_SUITE_DEPS to sys.path: dogpile.cache's own requirements
  (decorator, stevedore), after the virtualenv's packages;
- makes the `_region()` of dogpile's test fixture return SeawallRegion, whose
  `cache_on_arguments` is `seawall.Cache(...).cached()` and whose
  `cache_multi_on_arguments` is built on `get_or_load_many` (seawall has no multi-key
  decorator), on the Redis at $SEAWALL_DOGPILE_SUITE_REDIS, emptied before each test;
- writes each test's outcome as JSON to $SEAWALL_PEER_SUITE_OUT.

docs/cache-compat.md describes the mapping and lists what cannot pass.
"""

from __future__ import annotations

import functools
import itertools
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

sys.path.append(os.environ["SEAWALL_DOGPILE_SUITE_DEPS"])

import pytest
import redis
from dogpile.cache.api import NO_VALUE
from dogpile.testing import fixtures
from peersuites import outcome_recorder

import seawall

_client = redis.Redis.from_url(os.environ["SEAWALL_DOGPILE_SUITE_REDIS"])
_regions = itertools.count(1)

pytest_runtest_logreport, pytest_sessionfinish = outcome_recorder()


@pytest.fixture(autouse=True)
def _empty_redis() -> None:
    _client.flushdb()


class SeawallCachedFunction:
    """seawall's decorated function under dogpile's names: `original` is `__wrapped__`,
    and `get` answers dogpile's NO_VALUE where seawall answers None ("nothing cached").
    Calls, `invalidate`, `set` and `refresh` are seawall's, unchanged."""

    def __init__(self, cached: Any) -> None:
        self.cached = cached
        functools.update_wrapper(self, cached.__wrapped__)
        self.__signature__ = getattr(cached, "__signature__", None)
        self.original = cached.__wrapped__
        self.invalidate = cached.invalidate
        self.set = cached.set
        self.refresh = cached.refresh

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.cached(*args, **kwargs)

    def get(self, *args: Any, **kwargs: Any) -> Any:
        value = self.cached.get(*args, **kwargs)
        return NO_VALUE if value is None else value


class SeawallRegion:
    """The parts of dogpile's CacheRegion that its decorator tests use, over seawall.Cache.

    A region is a seawall namespace; a decorator's `namespace` is a namespace of its own
    beside it. `expiration_time` is seawall's `ttl` with `stale_ttl=0`: the caller that
    finds an entry expired loads it again, as dogpile's does (by default seawall would
    answer it from the old value and refresh in the background); None (no expiry) is
    seawall's default ttl, 300 s."""

    def __init__(self, expiration_time: float | None) -> None:
        self.name = f"dogpile-region-{next(_regions)}"
        self.expiration_time = expiration_time
        self._caches: dict[str | None, seawall.Cache] = {}

    def _cache(self, namespace: str | None) -> seawall.Cache:
        if namespace not in self._caches:
            name = self.name if namespace is None else f"{self.name}:{namespace}"
            ttl = {} if self.expiration_time is None else {"ttl": self.expiration_time}
            self._caches[namespace] = seawall.Cache(_client, name, stale_ttl=0, **ttl)
        return self._caches[namespace]

    def get(self, key: Any) -> Any:
        value = self._cache(None).get(key)
        return NO_VALUE if value is None else value

    def delete(self, key: Any) -> None:
        self._cache(None).delete(key)

    def cache_on_arguments(
        self,
        namespace: str | None = None,
        expiration_time: Any = None,
        should_cache_fn: Callable[[Any], bool] | None = None,
        to_str: Callable[[Any], str] = str,
        function_key_generator: Callable[..., Any] | None = None,
    ) -> Callable[[Callable[..., Any]], SeawallCachedFunction]:
        def decorate(function: Callable[..., Any]) -> SeawallCachedFunction:
            key = None
            if function_key_generator is not None:
                key = function_key_generator(namespace, function, to_str=to_str)
            cached = self._cache(namespace).cached(
                ttl=expiration_time, key=key, condition=should_cache_fn
            )
            return SeawallCachedFunction(cached(function))

        return decorate

    def cache_multi_on_arguments(
        self,
        namespace: str | None = None,
        expiration_time: Any = None,
        should_cache_fn: Callable[[Any], bool] | None = None,
        asdict: bool = False,
        to_str: Callable[[Any], str] = str,
        function_multi_key_generator: Callable[..., Any] | None = None,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """f(*args) caches one entry per argument: get_or_load_many over the keys of the
        arguments, the function called with the arguments of the keys it must load."""
        if should_cache_fn is not None:
            raise TypeError("seawall's get_or_load_many has no condition= (should_cache_fn)")
        cache = self._cache(namespace)

        def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
            if function_multi_key_generator is not None:
                keys_of = function_multi_key_generator(namespace, function, to_str=to_str)
            else:  # seawall's key of the call function(argument), for each argument
                one = cache.cached()(function)

                def keys_of(*args: Any) -> list[str]:
                    return [one.key(arg) for arg in args]

            def call(*args: Any) -> Any:
                keys: Sequence[str] = keys_of(*args)
                argument = dict(zip(keys, args, strict=True))

                def load(missing: list[str]) -> dict[str, Any]:
                    values = function(*[argument[key] for key in missing])
                    if asdict:  # an argument left out is "not found": None to seawall
                        return {key: values.get(argument[key]) for key in missing}
                    return dict(zip(missing, values, strict=True))

                found = cache.get_or_load_many(keys, load, ttl=expiration_time)
                if asdict:
                    pairs = zip(keys, args, strict=True)
                    return {a: found[k] for k, a in pairs if found[k] is not None}
                return [found[key] for key in keys]

            def invalidate(*args: Any) -> None:
                cache.delete_many(keys_of(*args))

            def set_(mapping: dict[Any, Any]) -> None:
                keys = keys_of(*mapping)
                cache.set_many(dict(zip(keys, mapping.values(), strict=True)), ttl=expiration_time)

            def get(*args: Any) -> list[Any]:
                keys = keys_of(*args)
                found = cache.get_many(keys)
                return [found.get(key, NO_VALUE) for key in keys]

            def refresh(*args: Any) -> Any:
                keys = keys_of(*args)
                values = function(*args)
                stored = [values[a] for a in args] if asdict else values
                cache.set_many(dict(zip(keys, stored, strict=True)), ttl=expiration_time)
                return values

            functools.update_wrapper(call, function)
            call.original = function  # type: ignore[attr-defined]
            call.invalidate = invalidate  # type: ignore[attr-defined]
            call.set = set_  # type: ignore[attr-defined]
            call.get = get  # type: ignore[attr-defined]
            call.refresh = refresh  # type: ignore[attr-defined]
            return call

        return decorate


def _region(
    self: Any, backend: str | None = None, region_args: Any = None, config_args: Any = None
) -> SeawallRegion:
    settings = {**self.config_args, **(config_args or {})}
    if region_args or set(settings) - {"expiration_time"}:
        raise TypeError(f"the adapter maps only expiration_time, got {region_args} {settings}")
    region = SeawallRegion(settings.get("expiration_time"))
    self._region_inst = region
    return region


fixtures._GenericBackendFixture._region = _region  # type: ignore[method-assign]
