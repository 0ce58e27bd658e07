"""The asyncio twins of seawall's public names: `await lock.acquire()`, `async with lock`."""

from __future__ import annotations

from seawall._async.bloom import AsyncBloomFilter as BloomFilter
from seawall._async.cache import AsyncCache as Cache
from seawall._async.fence import fenced_read, fenced_write
from seawall._async.idempotent import AsyncIdempotent as Idempotent
from seawall._async.lock import AsyncLock as Lock
from seawall._async.redlock import AsyncRedlock as Redlock
from seawall._async.rlock import AsyncRLock as RLock
from seawall._async.rwlock import AsyncRWLock as RWLock
from seawall._async.semaphore import AsyncSemaphore as Semaphore
from seawall._async.sink import AsyncOrderSink as OrderSink
from seawall._async.stock import AsyncStock as Stock
from seawall._breaker import CircuitBreaker, RateLimiter
from seawall._cache_stats import CacheStats
from seawall._orders import Balance, ReconcileReport
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
    LockTimeout,
    OrderConflictError,
    OrderSinkError,
    SeawallError,
    StockCounterLostError,
    StockError,
    StockQuantityError,
)

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
