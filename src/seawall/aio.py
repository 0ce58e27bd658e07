"""The asyncio twins of seawall's public names: `await lock.acquire()`, `async with lock`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar, overload

from seawall.bloom._async.bloom import AsyncBloomFilter as BloomFilter
from seawall.cache._async.cache import AsyncCache
from seawall.cache._async.cached_function import AsyncCachedFunction
from seawall.cache._breaker import CircuitBreaker, RateLimiter
from seawall.cache._stats import CacheStats
from seawall.errors import (
    BloomFilterError,
    CacheError,
    CacheSerializationError,
    CacheUnavailable,
    CacheWaitTimeout,
    DrainTimeout,
    IdempotencyTimeout,
    IdempotentOutcomeError,
    LockError,
    LockNotOwnedError,
    LockNotReplicatedError,
    LockQueueLostError,
    LockTimeout,
    OrderConflictError,
    OrderSinkError,
    SeawallError,
    StockCounterLostError,
    StockError,
    StockQuantityError,
)
from seawall.locks._async.fence import fenced_read, fenced_write
from seawall.locks._async.lock import AsyncLock as Lock
from seawall.locks._async.redlock import AsyncRedlock as Redlock
from seawall.locks._async.rlock import AsyncRLock as RLock
from seawall.locks._async.rwlock import AsyncRWLock as RWLock
from seawall.locks._async.semaphore import AsyncSemaphore as Semaphore
from seawall.stock._async.idempotent import AsyncIdempotent as Idempotent
from seawall.stock._async.sink import AsyncOrderSink as OrderSink
from seawall.stock._async.stock import AsyncStock as Stock
from seawall.stock._orders import Balance, ReconcileReport

__all__ = [
    "Balance",
    "BloomFilter",
    "BloomFilterError",
    "Cache",
    "CacheError",
    "CacheSerializationError",
    "CacheStats",
    "CacheUnavailable",
    "CacheWaitTimeout",
    "CircuitBreaker",
    "DrainTimeout",
    "IdempotencyTimeout",
    "Idempotent",
    "IdempotentOutcomeError",
    "Lock",
    "LockError",
    "LockNotOwnedError",
    "LockNotReplicatedError",
    "LockQueueLostError",
    "LockTimeout",
    "OrderConflictError",
    "OrderSink",
    "OrderSinkError",
    "RLock",
    "RWLock",
    "RateLimiter",
    "ReconcileReport",
    "Redlock",
    "SeawallError",
    "Semaphore",
    "Stock",
    "StockCounterLostError",
    "StockError",
    "StockQuantityError",
    "fenced_read",
    "fenced_write",
]

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

P = ParamSpec("P")


class _Decorate(Protocol):
    """What Cache.cached() returns, for type checkers: an async function's cached twin
    is awaited once, for the function's own result."""

    @overload
    def __call__(self, function: Callable[P, Awaitable[T]]) -> AsyncCachedFunction[P, T]: ...

    @overload
    def __call__(self, function: Callable[P, T]) -> AsyncCachedFunction[P, T]: ...


if TYPE_CHECKING:

    class Cache(AsyncCache):
        """For type checkers: here a loader may also be an async function (its result
        is awaited); the class itself is AsyncCache."""

        @overload
        async def get_or_load(
            self,
            key: str | bytes | int,
            loader: Callable[[], Awaitable[T]],
            ttl: float | None = None,
            *,
            tags: Iterable[str] | None = None,
        ) -> T: ...

        @overload
        async def get_or_load(
            self,
            key: str | bytes | int,
            loader: Callable[[], T],
            ttl: float | None = None,
            *,
            tags: Iterable[str] | None = None,
        ) -> T: ...

        async def get_or_load(
            self, key: object, loader: object, ttl: object = None, *, tags: object = None
        ) -> object:
            raise NotImplementedError

        @overload
        async def get_or_load_many(
            self,
            keys: Iterable[K],
            loader: Callable[[list[K]], Awaitable[Mapping[K, V]]],
            ttl: float | None = None,
            *,
            tags: Iterable[str] | None = None,
        ) -> dict[K, V | None]: ...

        @overload
        async def get_or_load_many(
            self,
            keys: Iterable[K],
            loader: Callable[[list[K]], Mapping[K, V]],
            ttl: float | None = None,
            *,
            tags: Iterable[str] | None = None,
        ) -> dict[K, V | None]: ...

        async def get_or_load_many(
            self, keys: object, loader: object, ttl: object = None, *, tags: object = None
        ) -> object:
            raise NotImplementedError

        def cached(
            self,
            ttl: float | None = None,
            key: str | Callable[..., Any] | None = None,
            *,
            condition: Callable[[Any], bool] | None = None,
            tags: Iterable[str] | None = None,
        ) -> _Decorate: ...

else:
    Cache = AsyncCache
