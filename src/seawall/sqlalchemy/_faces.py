"""QueryCache (sync Session) and AsyncQueryCache (AsyncSession): the two faces."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy.orm import Session, scoped_session, sessionmaker
from sqlalchemy.util import await_only, greenlet_spawn

from seawall.cache._async import reads as async_reads
from seawall.cache._async.cache import AsyncCache
from seawall.cache._sync import reads as sync_reads
from seawall.cache._sync.cache import Cache
from seawall.sqlalchemy._core import QueryCacheCore

F = TypeVar("F")

ASYNCIO_HINT = (
    "AsyncQueryCache needs SQLAlchemy's asyncio support, which needs greenlet: "
    "pip install 'seawall[sqlalchemy]' (it brings SQLAlchemy[asyncio]) or pip install greenlet"
)


def _sqlalchemy_asyncio() -> Any:
    """sqlalchemy.ext.asyncio, imported only for AsyncQueryCache: it refuses to import
    without greenlet, which the sync QueryCache does not need."""
    try:
        from sqlalchemy.ext import asyncio
    except ImportError as exc:
        raise ImportError(f"{ASYNCIO_HINT} ({exc})") from exc
    return asyncio


class QueryCache(QueryCacheCore):
    """Results of SELECTs marked cached(), shared by every process through Redis and
    invalidated after each COMMIT that writes their tables (see docs/sqlalchemy.md).

    `cache_options` go to the underlying seawall.Cache objects (breaker=, l1_size=,
    l1_ttl=, serializer=, stale_ttl=, ...).
    """

    def __repr__(self) -> str:
        return f"<seawall.sqlalchemy.QueryCache {self.namespace!r} ttl={self.ttl}s>"

    def _make_cache(self, namespace: str, ttl: float, options: dict[str, Any]) -> Any:
        return Cache(self._client, namespace, ttl, **options)

    def _run(self, call: Any) -> Any:
        return call

    def _loader(self, load: Callable[[], Any]) -> Callable[[], Any]:
        return load

    def _plain_reads(self, reads: list[tuple[Any, str]]) -> Any:
        return sync_reads.plain_reads(reads)

    def attach(self, factory: F) -> F:
        """Serve cached() statements of sessions made by `factory` (a sessionmaker, a
        scoped_session or a Session subclass) and invalidate on their commits. Returns `factory`."""
        source: Any = factory
        if isinstance(source, scoped_session):
            source = source.session_factory
        if isinstance(source, sessionmaker):
            target = source.class_
        elif isinstance(source, type) and issubclass(source, Session):
            target = source
        else:
            raise TypeError(
                f"QueryCache {self.namespace!r}: attach() takes a sessionmaker or a Session "
                f"subclass, got {factory!r}; for AsyncSession use AsyncQueryCache"
            )
        self._listen(target)
        return factory

    def stats(self) -> Any:
        """The result cache's seawall.CacheStats (hits per level, misses, loads, ...)."""
        return self.entries.stats()

    def invalidate(self, *tables: Any) -> None:
        """Drop every cached result that reads these tables (Table objects, mapped classes
        or "schema.table" names): for writes the session does not see (raw connections,
        other programs). One round trip per table."""
        for cache, keys in self._table_drops(tables):
            cache.delete_many(keys)


class AsyncQueryCache(QueryCacheCore):
    """QueryCache for AsyncSession, on a redis.asyncio client (same semantics)."""

    def __init__(self, client: Any, namespace: str, ttl: float = 300.0, **cache_options: Any):
        _sqlalchemy_asyncio()  # fail here, naming what to install, not at attach()
        super().__init__(client, namespace, ttl, **cache_options)

    def __repr__(self) -> str:
        return f"<seawall.sqlalchemy.AsyncQueryCache {self.namespace!r} ttl={self.ttl}s>"

    def _make_cache(self, namespace: str, ttl: float, options: dict[str, Any]) -> Any:
        return AsyncCache(self._client, namespace, ttl, **options)

    def _run(self, call: Any) -> Any:
        # Session events of an AsyncSession run inside SQLAlchemy's greenlet: a coroutine
        # is awaited from there as the database driver's are.
        return await_only(call)

    def _loader(self, load: Callable[[], Any]) -> Callable[[], Any]:
        async def run_in_greenlet() -> Any:
            # The Cache calls loaders on the event loop; the query needs a greenlet again.
            return await greenlet_spawn(load)

        return run_in_greenlet

    def _plain_reads(self, reads: list[tuple[Any, str]]) -> Any:
        return async_reads.plain_reads(reads)

    def attach(self, factory: F) -> F:
        """Serve cached() statements of sessions made by `factory` (an async_sessionmaker
        or an AsyncSession subclass). Their sync sessions get a private Session subclass
        that carries the events. Returns `factory`."""
        asyncio = _sqlalchemy_asyncio()
        source: Any = factory
        if isinstance(source, asyncio.async_sessionmaker):
            base = source.kw.get("sync_session_class", Session)
            target = type(base.__name__, (base,), {})
            source.kw["sync_session_class"] = target
        elif isinstance(source, type) and issubclass(source, asyncio.AsyncSession):
            session_class: Any = source
            base = session_class.sync_session_class
            target = type(base.__name__, (base,), {})
            session_class.sync_session_class = target
        else:
            raise TypeError(
                f"AsyncQueryCache {self.namespace!r}: attach() takes an async_sessionmaker or "
                f"an AsyncSession subclass, got {factory!r}; for Session use QueryCache"
            )
        self._listen(target)
        return factory

    async def invalidate(self, *tables: Any) -> None:
        """See QueryCache.invalidate."""
        for cache, keys in self._table_drops(tables):
            await cache.delete_many(keys)
