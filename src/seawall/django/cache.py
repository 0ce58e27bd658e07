"""seawall.django.RedisCache: a Django cache backend whose get_or_set never stampedes.

    CACHES = {
        "default": {
            "BACKEND": "seawall.django.RedisCache",
            "LOCATION": "redis://127.0.0.1:6379/0",     # a list of URLs: a Redis Cluster
            "OPTIONS": {"lease": 10.0, "socket_timeout": 1.0},
        }
    }

Django's semantics throughout (timeouts, versions, KEY_PREFIX, KEY_FUNCTION, key warnings)
and Django's storage format, so entries written by Django's own RedisCache are read here
and the other way round. The sync methods use a redis.Redis client; the a* methods use a
redis.asyncio client of the running event loop, never a thread. See docs/django.md.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Iterable, Mapping
from typing import Any

import redis
import redis.cluster
from django.core.cache.backends.base import DEFAULT_TIMEOUT, default_key_func
from django.core.exceptions import ImproperlyConfigured

from seawall.django._async_methods import AsyncMethods
from seawall.django._extras import (
    DOWN_PTTL,
    Extras,
    answer_empty,
    answer_false,
    answer_none,
    answer_nothing,
    answer_unavailable,
)
from seawall.django._local import MISSING, shared
from seawall.django._options import location_urls, make_client, refuse_foreign, seconds
from seawall.django._serializer import make_serializer
from seawall.django._sync.again import SecondDeletes
from seawall.django._sync.store import RedisStore
from seawall.django._woken import ReadFlights, sharing_since
from seawall.django.errors import NotAnInteger
from seawall.shared._concurrency import log

__all__ = ["NotAnInteger", "RedisCache"]


class RedisCache(AsyncMethods):
    """A Django cache backend on Redis (or a Redis Cluster) through seawall."""

    def __init__(self, server: str | list[str] | tuple[str, ...], params: dict[str, Any]) -> None:
        super().__init__(params)
        options = dict(params.get("OPTIONS") or {})
        refuse_foreign(options)
        urls = location_urls(server)
        self._urls = urls
        self._cluster = bool(options.pop("cluster", len(urls) > 1))
        self._serializer = make_serializer(options.pop("serializer", None))
        self._lease = seconds(options.pop("lease", 10.0), "lease")
        wait = options.pop("wait_timeout", None)
        self._wait_timeout = 2 * self._lease if wait is None else seconds(wait, "wait_timeout")
        stale = options.pop("stale_ttl", None)
        self._stale_ttl = None if stale in (None, 0) else seconds(stale, "stale_ttl")
        clear_prefix = options.pop("clear_prefix", None)
        # Keys of Django's default KEY_FUNCTION: KEY_PREFIX, ":", a version, ":", the key.
        self._clear_versioned = clear_prefix is None and self.key_func is default_key_func
        if self._clear_versioned:
            clear_prefix = f"{self.key_prefix}:"
        self._clear_prefix: str | None = clear_prefix
        if options.get("decode_responses"):
            raise ImproperlyConfigured(
                "OPTIONS['decode_responses'] must stay False: cached values are bytes"
            )
        self._x = Extras(options, (tuple(urls), self._cluster), self._make_client)
        self._client_options = options
        # The clients are shared by the instances of this process with the same location
        # and client options (see _local).
        self._where = (tuple(urls), self._cluster, repr(sorted(options.items())))
        self._mutex = threading.Lock()
        self._sync_store: RedisStore | None = None
        self._warned_on_loop = False
        self._async_stores = weakref.WeakKeyDictionary()

    # --- clients --------------------------------------------------------------------

    def client(self) -> redis.Redis | redis.cluster.RedisCluster:
        """The sync redis-py client (made on first use, shared by the threads)."""
        return self._store().client

    def checking_client(self, timeout: float) -> redis.Redis | redis.cluster.RedisCluster:
        """A new sync client whose every call gives up after `timeout` seconds (for
        checks that must not hang on an unreachable server); close it after use."""
        options = {**self._client_options, "socket_timeout": timeout}
        options["socket_connect_timeout"] = timeout
        return self._make_client(redis.Redis, redis.cluster.RedisCluster, options)  # type: ignore[no-any-return]

    def _store(self) -> RedisStore:
        if asyncio._get_running_loop() is not None and not self._warned_on_loop:
            self._warned_on_loop = True
            log.warning(
                "%r: a sync method was called on a running event loop (an async view or "
                "middleware?): it blocks every request of this worker until Redis answers; "
                "await its a* twin instead (await cache.aget(...)). Logged once per cache",
                self,
            )
        store = self._sync_store
        if store is None:
            with self._mutex:
                if self._sync_store is None:
                    self._sync_store = RedisStore(
                        shared(
                            ("client", self._where),
                            lambda: self._make_client(redis.Redis, redis.cluster.RedisCluster),
                        ),
                        self._serializer,
                        lease=self._lease,
                        wait_timeout=self._wait_timeout,
                        stale_ttl=self._stale_ttl,
                    )
                store = self._sync_store
            # From its first use on, this process carries out due second deletes
            # (again_after), those of processes that died included.
            self._second_deletes(store).serve()
        return store

    def _second_deletes(self, store: RedisStore) -> SecondDeletes:
        key = ("again", self._where, self._stale_ttl)
        return shared(key, lambda: SecondDeletes(store, self._x.local))

    def _make_client(self, single: Any, cluster: Any, options: dict[str, Any] | None = None) -> Any:
        options = self._client_options if options is None else options
        return make_client(self._urls, self._cluster, single, cluster, options)

    # --- Django's BaseCache -------------------------------------------------------

    def get_backend_timeout(self, timeout: Any = DEFAULT_TIMEOUT) -> float | None:
        """Seconds to live: None for ever, 0 for "expire at once" (any timeout <= 0).
        Fractions of a second are kept (Redis expires in milliseconds)."""
        if timeout is DEFAULT_TIMEOUT:
            timeout = self.default_timeout
        if timeout is None:
            return None
        seconds: float = max(0, timeout)
        return seconds

    def add(
        self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: Any = None
    ) -> bool:
        made = self.make_and_validate_key(key, version=version)
        store = self._store()
        seconds = self.get_backend_timeout(timeout)
        added = self._x.guarded(lambda: store.add(made, value, seconds), answer_false)
        if added:
            self._x.changed(store, [made])
        return added

    def get(self, key: Any, default: Any = None, version: Any = None) -> Any:
        made = self.make_and_validate_key(key, version=version)
        store = self._store()
        local = self._x.local()
        if local is None:
            sharing = sharing_since()
            return self._x.guarded(
                lambda: (
                    store.get(made, default)
                    if sharing is None
                    else self._shared_get(store, made, sharing, default)
                ),
                lambda: self._x.stale_or(made, default, self._serializer.loads),
            )
        raw = local.get(made)
        if raw is not MISSING:
            return self._serializer.loads(raw)
        epoch = local.fill_epoch()
        raw, pttl = self._x.guarded(lambda: store.get_with_pttl(made), answer_nothing)
        return self._filled(local, made, raw, pttl, epoch, default)

    def _shared_get(
        self, store: RedisStore, key: str, sharing: tuple[float, str], default: Any
    ) -> Any:
        """get() inside the middleware's shared_since(): a GET of `key` sent since then
        by another thread of this process, for the same kind of lookup, is joined (see
        _woken)."""
        since, kind = sharing
        flights = shared(("reads", self._where, kind), ReadFlights)
        raw = flights.read(key, since, lambda: store.client.get(key), self._wait_timeout)
        return default if raw is None else self._serializer.loads(raw)

    def _filled(
        self, local: Any, key: str, raw: Any, pttl: int, epoch: int | None, default: Any
    ) -> Any:
        if raw is None:
            if pttl == DOWN_PTTL:
                return self._x.stale_or(key, default, self._serializer.loads)
            return default
        value = self._serializer.loads(raw)  # before filling: a value that cannot be read
        local.fill(key, raw, pttl, epoch)  # is never held
        return value

    def set(
        self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: Any = None
    ) -> None:
        made = self.make_and_validate_key(key, version=version)
        store = self._store()
        seconds = self.get_backend_timeout(timeout)
        self._x.guarded(lambda: store.set(made, value, seconds), answer_none)
        self._x.changed(store, [made])

    def touch(self, key: Any, timeout: Any = DEFAULT_TIMEOUT, version: Any = None) -> bool:
        made = self.make_and_validate_key(key, version=version)
        store = self._store()
        seconds = self.get_backend_timeout(timeout)
        touched = self._x.guarded(lambda: store.touch(made, seconds), answer_false)
        if touched:  # a copy held elsewhere must not outlive a shorter expiry
            self._x.changed(store, [made])
        return touched

    def delete(self, key: Any, version: Any = None, *, again_after: float | None = None) -> bool:
        """Django's delete(); with `again_after` (seconds), delete it once more that much
        later (the delayed double delete, docs/django.md): the second delete is recorded
        in Redis before the first, so it happens even if this process dies."""
        made = self.make_and_validate_key(key, version=version)
        store = self._store()
        if again_after is not None:
            self._second_deletes(store).schedule([made], again_after)
        deleted = self._x.guarded(lambda: store.delete(made), answer_false)
        self._x.changed(store, [made])
        return deleted

    def _key_map(self, keys: Iterable[Any], version: Any) -> dict[str, Any]:
        return {self.make_and_validate_key(key, version=version): key for key in keys}

    def get_many(self, keys: Iterable[Any], version: Any = None) -> dict[Any, Any]:
        made = self._key_map(keys, version)
        store = self._store()
        found = self._x.guarded(lambda: store.get_many(list(made)), answer_empty)
        return {made[key]: value for key, value in found.items()}

    def has_key(self, key: Any, version: Any = None) -> bool:
        made = self.make_and_validate_key(key, version=version)
        local = self._x.local()
        if local is not None and local.get(made) is not MISSING:
            return True
        store = self._store()
        return self._x.guarded(lambda: store.has_key(made), answer_false)

    def incr(self, key: Any, delta: int = 1, version: Any = None) -> int:
        made = self.make_and_validate_key(key, version=version)
        store = self._store()
        value: int = self._x.guarded(lambda: store.incr(made, delta), answer_unavailable(made))
        self._x.changed(store, [made])
        return value

    def _made(self, data: Mapping[Any, Any], version: Any) -> dict[str, Any]:
        return {self.make_and_validate_key(k, version=version): v for k, v in data.items()}

    def set_many(
        self, data: Mapping[Any, Any], timeout: Any = DEFAULT_TIMEOUT, version: Any = None
    ) -> list[Any]:
        """Returns the keys that could not be stored (all of them while the breaker is
        open), as Django's set_many does."""
        if not data:
            return []
        made = self._made(data, version)
        store = self._store()
        seconds = self.get_backend_timeout(timeout)

        def write() -> bool:
            store.set_many(made, seconds)
            return True

        stored = self._x.guarded(write, answer_false)
        self._x.changed(store, made)
        return [] if stored else list(data)

    def delete_many(
        self, keys: Iterable[Any], version: Any = None, *, again_after: float | None = None
    ) -> None:
        made = [self.make_and_validate_key(key, version=version) for key in keys]
        if made:
            store = self._store()
            if again_after is not None:
                self._second_deletes(store).schedule(made, again_after)
            self._x.guarded(lambda: store.delete_many(made), answer_none)
            self._x.changed(store, made)

    def clear(self) -> None:
        """Delete this cache's keys: KEY_PREFIX, ":", a version, ":", a key (or those
        starting with OPTIONS["clear_prefix"]); with a KEY_FUNCTION of your own and no
        clear_prefix, every key of the database, as Django's RedisCache does."""
        store = self._store()
        self._x.guarded(
            lambda: store.clear(self._clear_prefix, self._clear_versioned),
            answer_unavailable("clear()"),
        )
        self._x.cleared(store)

    def get_or_set(
        self, key: Any, default: Any, timeout: Any = DEFAULT_TIMEOUT, version: Any = None
    ) -> Any:
        """The cached value of `key`; if missing, `default` (its result, if callable) is
        stored and returned. A callable runs once for all callers in every process that
        miss the key together; the others wait for its value."""
        if not callable(default):
            return super().get_or_set(key, default, timeout, version)
        made = self.make_and_validate_key(key, version=version)
        local = self._x.local()
        if local is not None:
            raw = local.get(made)
            if raw is not MISSING:
                return self._serializer.loads(raw)
        store = self._store()
        seconds = self.get_backend_timeout(timeout)
        # Redis down (breaker open): the callable is called, as with no cache.
        return self._x.guarded(lambda: store.get_or_load(made, default, seconds), default)

    def begin_load(self, key: Any, version: Any = None) -> str | None:
        """For a value made and stored by other means than get_or_set (the cache
        middleware's pages): a token if this caller is to make `key`'s value, which it
        then set()s before end_load(key, token); None when the value is there or another
        caller's load has ended meanwhile (look again; if it is still missing, make it
        without a lease). One caller at a time holds the lease, across all processes."""
        made = self.make_and_validate_key(key, version=version)
        store = self._store()
        return self._x.guarded(lambda: store.begin_load(made), answer_none)

    def end_load(self, key: Any, token: str, version: Any = None) -> None:
        """Give back the lease of begin_load() and wake the callers waiting for it."""
        made = self.make_and_validate_key(key, version=version)
        store = self._store()
        self._x.guarded(lambda: store.end_load(made, token), answer_none)

    def close(self, **kwargs: Any) -> None:
        """Called by Django at the end of each request: the connection pools are kept, as
        Django's RedisCache keeps them; only clients of event loops now closed go."""
        with self._mutex:
            for loop in [loop for loop in self._async_stores if loop.is_closed()]:
                del self._async_stores[loop]

    def __repr__(self) -> str:
        return f"<seawall.django.RedisCache {', '.join(self._urls)}>"


RedisCache._sync_face = RedisCache
