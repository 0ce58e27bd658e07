"""seawall: locks, caches and inventory that stay correct when many processes share Redis.

Sync API here; the asyncio twins of the same names live in `seawall.aio`.
"""

from __future__ import annotations

from seawall._breaker import CircuitBreaker, RateLimiter
from seawall._cache_stats import CacheStats
from seawall._dedupe import claim_message, create_processed_table
from seawall._orders import Balance, ReconcileReport
from seawall._sync.bloom import BloomFilter
from seawall._sync.cache import Cache
from seawall._sync.fence import fenced_read, fenced_write
from seawall._sync.idempotent import Idempotent
from seawall._sync.lock import Lock
from seawall._sync.redlock import Redlock
from seawall._sync.rlock import RLock
from seawall._sync.rwlock import RWLock
from seawall._sync.semaphore import Semaphore
from seawall._sync.sink import OrderSink
from seawall._sync.stock import Stock
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
    ServerNotFoundError,
    StockCounterLostError,
    StockError,
    StockQuantityError,
)
from seawall.launcher import server

__version__ = "0.1.0"

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
    "ServerNotFoundError",
    "Stock",
    "StockCounterLostError",
    "StockError",
    "StockQuantityError",
    "__version__",
    "claim_message",
    "create_processed_table",
    "fenced_read",
    "fenced_write",
    "server",
]
