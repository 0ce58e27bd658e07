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
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
from asgiref.sync import sync_to_async
from django.core.cache.backends.base import DEFAULT_TIMEOUT, BaseCache, default_key_func
from django.core.exceptions import ImproperlyConfigured, SynchronousOnlyOperation

from seawall.django._async.store import AsyncRedisStore
from seawall.django._serializer import make_serializer
from seawall.django._sync.store import RedisStore
from seawall.django.errors import NotAnInteger
from seawall.shared._concurrency import log

__all__ = ["NotAnInteger", "RedisCache"]

# django-redis's OPTIONS and what to write here instead (None: nothing to write).
DJANGO_REDIS_OPTIONS = {
    "CLIENT_CLASS": None,
    "SERIALIZER": "serializer",
    "COMPRESSOR": None,
    "SOCKET_TIMEOUT": "socket_timeout",
    "SOCKET_CONNECT_TIMEOUT": "socket_connect_timeout",
    "PASSWORD": "password",
    "CONNECTION_POOL_KWARGS": "the pool's options themselves (max_connections, ...)",
    "CONNECTION_POOL_CLASS": None,
    "PARSER_CLASS": "parser_class",
    "REDIS_CLIENT_CLASS": None,
    "REDIS_CLIENT_KWARGS": "the client's options themselves",
    "IGNORE_EXCEPTIONS": None,
}

# OPTIONS seawall reads; every other option goes to redis-py's client (db, password,
# socket_timeout, max_connections, ssl_cert_reqs, ...).
OWN_OPTIONS = {"serializer", "lease", "wait_timeout", "cluster", "clear_prefix"}


def _seconds(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ImproperlyConfigured(
            f"OPTIONS[{what!r}] must be a number of seconds > 0, got {value!r}"
        )
    return float(value)


class RedisCache(BaseCache):
    """A Django cache backend on Redis (or a Redis Cluster) through seawall."""

    def __init__(self, server: str | list[str] | tuple[str, ...], params: dict[str, Any]) -> None:
        super().__init__(params)
        options = dict(params.get("OPTIONS") or {})
        for name in sorted(options):
            if name in DJANGO_REDIS_OPTIONS:
                instead = DJANGO_REDIS_OPTIONS[name]
                hint = f"write {instead!r} instead" if instead else "it has no equivalent here"
                raise ImproperlyConfigured(
                    f"OPTIONS[{name!r}] is a django-redis option; seawall.django.RedisCache "
                    f"does not read it: {hint} (docs/django.md, 'Moving from django-redis')"
                )
            if name in ("MAX_ENTRIES", "CULL_FREQUENCY"):
                raise ImproperlyConfigured(
                    f"OPTIONS[{name!r}]: Redis bounds its memory itself (maxmemory and "
                    "maxmemory-policy in the server's configuration); remove this option"
                )
        if isinstance(server, str):
            urls = [url.strip() for url in server.replace(";", ",").split(",") if url.strip()]
        else:
            urls = [str(url) for url in server]
        if not urls:
            raise ImproperlyConfigured(
                "seawall.django.RedisCache needs a LOCATION: a redis:// URL, or a list of "
                "URLs of Redis Cluster nodes"
            )
        self._urls = urls
        self._cluster = bool(options.pop("cluster", len(urls) > 1))
        self._serializer = make_serializer(options.pop("serializer", None))
        self._lease = _seconds(options.pop("lease", 10.0), "lease")
        wait = options.pop("wait_timeout", None)
        self._wait_timeout = 2 * self._lease if wait is None else _seconds(wait, "wait_timeout")
        clear_prefix = options.pop("clear_prefix", None)
        if clear_prefix is None and self.key_func is default_key_func:
            clear_prefix = f"{self.key_prefix}:"
        self._clear_prefix: str | None = clear_prefix
        if options.get("decode_responses"):
            raise ImproperlyConfigured(
                "OPTIONS['decode_responses'] must stay False: cached values are bytes"
            )
        self._client_options = options
        self._mutex = threading.Lock()
        self._sync_store: RedisStore | None = None
        self._warned_on_loop = False
        self._async_stores: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncRedisStore]
        self._async_stores = weakref.WeakKeyDictionary()

    # --- clients --------------------------------------------------------------------

    def client(self) -> redis.Redis | redis.cluster.RedisCluster:
        """The sync redis-py client (made on first use, shared by the threads)."""
        return self._store().client

    def async_client(self) -> redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster:
        """The asyncio redis-py client of the running event loop."""
        return self._astore().client

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
                        self._make_client(redis.Redis, redis.cluster.RedisCluster),
                        self._serializer,
                        lease=self._lease,
                        wait_timeout=self._wait_timeout,
                    )
                store = self._sync_store
        return store

    def _astore(self) -> AsyncRedisStore:
        # asyncio connections belong to the loop that opened them: one client per loop.
        loop = asyncio.get_running_loop()
        store = self._async_stores.get(loop)
        if store is None:
            with self._mutex:
                store = self._async_stores.get(loop)
                if store is None:
                    store = self._async_stores[loop] = AsyncRedisStore(
                        self._make_client(redis.asyncio.Redis, redis.asyncio.cluster.RedisCluster),
                        self._serializer,
                        lease=self._lease,
                        wait_timeout=self._wait_timeout,
                    )
        return store

    def _make_client(self, single: Any, cluster: Any, options: dict[str, Any] | None = None) -> Any:
        options = self._client_options if options is None else options
        if not self._cluster:
            return single.from_url(self._urls[0], **options)
        nodes_module = (
            redis.asyncio.cluster
            if cluster is redis.asyncio.cluster.RedisCluster
            else redis.cluster
        )
        nodes = []
        for url in self._urls[1:]:
            parsed = redis.connection.parse_url(url)  # type: ignore[no-untyped-call,unused-ignore]
            nodes.append(
                nodes_module.ClusterNode(parsed.get("host", "localhost"), parsed.get("port", 6379))
            )
        extra = {"startup_nodes": nodes} if nodes else {}
        return cluster.from_url(self._urls[0], **extra, **options)

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
        key = self.make_and_validate_key(key, version=version)
        return self._store().add(key, value, self.get_backend_timeout(timeout))

    async def aadd(
        self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: Any = None
    ) -> bool:
        made = self.make_and_validate_key(key, version=version)
        try:
            return await self._astore().add(made, value, self.get_backend_timeout(timeout))
        except SynchronousOnlyOperation:  # see _pickles_in_a_thread
            added = await self._pickles_in_a_thread(
                RedisCache.add, self, key, value, timeout, version
            )
            return bool(added)

    def get(self, key: Any, default: Any = None, version: Any = None) -> Any:
        key = self.make_and_validate_key(key, version=version)
        return self._store().get(key, default)

    async def aget(self, key: Any, default: Any = None, version: Any = None) -> Any:
        key = self.make_and_validate_key(key, version=version)
        return await self._astore().get(key, default)

    def set(
        self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: Any = None
    ) -> None:
        key = self.make_and_validate_key(key, version=version)
        self._store().set(key, value, self.get_backend_timeout(timeout))

    async def aset(
        self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: Any = None
    ) -> None:
        made = self.make_and_validate_key(key, version=version)
        try:
            await self._astore().set(made, value, self.get_backend_timeout(timeout))
        except SynchronousOnlyOperation:  # see _pickles_in_a_thread
            await self._pickles_in_a_thread(RedisCache.set, self, key, value, timeout, version)

    async def _pickles_in_a_thread(self, method: Any, *args: Any) -> Any:
        """Pickling a QuerySet runs its query (a model instance with deferred fields
        may too), which Django refuses on an event loop; the value is then written by
        the sync method in Django's sync thread, as Django's default a* methods do. The
        refusal comes before anything is sent, so nothing is written twice."""
        return await sync_to_async(method, thread_sensitive=True)(*args)

    def touch(self, key: Any, timeout: Any = DEFAULT_TIMEOUT, version: Any = None) -> bool:
        key = self.make_and_validate_key(key, version=version)
        return self._store().touch(key, self.get_backend_timeout(timeout))

    async def atouch(self, key: Any, timeout: Any = DEFAULT_TIMEOUT, version: Any = None) -> bool:
        key = self.make_and_validate_key(key, version=version)
        return await self._astore().touch(key, self.get_backend_timeout(timeout))

    def delete(self, key: Any, version: Any = None) -> bool:
        key = self.make_and_validate_key(key, version=version)
        return self._store().delete(key)

    async def adelete(self, key: Any, version: Any = None) -> bool:
        key = self.make_and_validate_key(key, version=version)
        return await self._astore().delete(key)

    def _key_map(self, keys: Iterable[Any], version: Any) -> dict[str, Any]:
        return {self.make_and_validate_key(key, version=version): key for key in keys}

    def get_many(self, keys: Iterable[Any], version: Any = None) -> dict[Any, Any]:
        made = self._key_map(keys, version)
        found = self._store().get_many(list(made))
        return {made[key]: value for key, value in found.items()}

    async def aget_many(self, keys: Iterable[Any], version: Any = None) -> dict[Any, Any]:
        made = self._key_map(keys, version)
        found = await self._astore().get_many(list(made))
        return {made[key]: value for key, value in found.items()}

    def has_key(self, key: Any, version: Any = None) -> bool:
        key = self.make_and_validate_key(key, version=version)
        return self._store().has_key(key)

    async def ahas_key(self, key: Any, version: Any = None) -> bool:
        key = self.make_and_validate_key(key, version=version)
        return await self._astore().has_key(key)

    def incr(self, key: Any, delta: int = 1, version: Any = None) -> int:
        key = self.make_and_validate_key(key, version=version)
        return self._store().incr(key, delta)

    async def aincr(self, key: Any, delta: int = 1, version: Any = None) -> int:
        key = self.make_and_validate_key(key, version=version)
        return await self._astore().incr(key, delta)

    def _made(self, data: Mapping[Any, Any], version: Any) -> dict[str, Any]:
        return {self.make_and_validate_key(k, version=version): v for k, v in data.items()}

    def set_many(
        self, data: Mapping[Any, Any], timeout: Any = DEFAULT_TIMEOUT, version: Any = None
    ) -> list[Any]:
        if data:
            self._store().set_many(self._made(data, version), self.get_backend_timeout(timeout))
        return []

    async def aset_many(
        self, data: Mapping[Any, Any], timeout: Any = DEFAULT_TIMEOUT, version: Any = None
    ) -> list[Any]:
        if data:
            made = self._made(data, version)
            try:
                await self._astore().set_many(made, self.get_backend_timeout(timeout))
            except SynchronousOnlyOperation:  # see _pickles_in_a_thread
                await self._pickles_in_a_thread(RedisCache.set_many, self, data, timeout, version)
        return []

    def delete_many(self, keys: Iterable[Any], version: Any = None) -> None:
        made = [self.make_and_validate_key(key, version=version) for key in keys]
        if made:
            self._store().delete_many(made)

    async def adelete_many(self, keys: Iterable[Any], version: Any = None) -> None:
        made = [self.make_and_validate_key(key, version=version) for key in keys]
        if made:
            await self._astore().delete_many(made)

    def clear(self) -> None:
        """Delete this cache's keys: those starting with KEY_PREFIX + ":" (or
        OPTIONS["clear_prefix"]); with a KEY_FUNCTION of your own and no clear_prefix,
        every key of the database, as Django's RedisCache does."""
        self._store().clear(self._clear_prefix)

    async def aclear(self) -> None:
        await self._astore().clear(self._clear_prefix)

    def get_or_set(
        self, key: Any, default: Any, timeout: Any = DEFAULT_TIMEOUT, version: Any = None
    ) -> Any:
        """The cached value of `key`; if missing, `default` (its result, if callable) is
        stored and returned. A callable runs once for all callers in every process that
        miss the key together; the others wait for its value."""
        if not callable(default):
            return super().get_or_set(key, default, timeout, version)
        made = self.make_and_validate_key(key, version=version)
        return self._store().get_or_load(made, default, self.get_backend_timeout(timeout))

    async def aget_or_set(
        self, key: Any, default: Any, timeout: Any = DEFAULT_TIMEOUT, version: Any = None
    ) -> Any:
        """As get_or_set; `default` may also be an async function."""
        if not callable(default):
            found = await self.aget(key, self._missing_key, version=version)
            if found is not self._missing_key:
                return found
            await self.aadd(key, default, timeout, version)
            return await self.aget(key, default, version=version)
        made = self.make_and_validate_key(key, version=version)
        return await self._astore().get_or_load(made, default, self.get_backend_timeout(timeout))

    def begin_load(self, key: Any, version: Any = None) -> str | None:
        """For a value made and stored by other means than get_or_set (the cache
        middleware's pages): a token if this caller is to make `key`'s value, which it
        then set()s before end_load(key, token); None when the value is there or another
        caller's load has ended meanwhile (look again; if it is still missing, make it
        without a lease). One caller at a time holds the lease, across all processes."""
        key = self.make_and_validate_key(key, version=version)
        return self._store().begin_load(key)

    async def abegin_load(self, key: Any, version: Any = None) -> str | None:
        key = self.make_and_validate_key(key, version=version)
        return await self._astore().begin_load(key)

    def end_load(self, key: Any, token: str, version: Any = None) -> None:
        """Give back the lease of begin_load() and wake the callers waiting for it."""
        key = self.make_and_validate_key(key, version=version)
        self._store().end_load(key, token)

    async def aend_load(self, key: Any, token: str, version: Any = None) -> None:
        key = self.make_and_validate_key(key, version=version)
        await self._astore().end_load(key, token)

    def close(self, **kwargs: Any) -> None:
        """Called by Django at the end of each request: the connection pools are kept, as
        Django's RedisCache keeps them; only clients of event loops now closed go."""
        with self._mutex:
            for loop in [loop for loop in self._async_stores if loop.is_closed()]:
                del self._async_stores[loop]

    def __repr__(self) -> str:
        return f"<seawall.django.RedisCache {', '.join(self._urls)}>"
