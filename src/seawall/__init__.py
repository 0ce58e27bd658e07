"""seawall: locks, caches and inventory that stay correct when many processes share Redis.

Sync API here; the asyncio twins of the same names live in `seawall.aio`.
"""

from __future__ import annotations

from seawall.bloom._sync.bloom import BloomFilter
from seawall.cache._breaker import CircuitBreaker, RateLimiter
from seawall.cache._stats import CacheStats
from seawall.cache._sync.cache import Cache
from seawall.errors import (
    BloomFilterError,
    CacheError,
    CacheSerializationError,
    CacheUnavailable,
    CacheWaitTimeout,
    ClusterClientError,
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
    ServerNotFoundError,
    StockCounterLostError,
    StockError,
    StockQuantityError,
)
from seawall.launcher import server
from seawall.locks._sync.fence import fenced_read, fenced_write
from seawall.locks._sync.lock import Lock
from seawall.locks._sync.redlock import Redlock
from seawall.locks._sync.rlock import RLock
from seawall.locks._sync.rwlock import RWLock
from seawall.locks._sync.semaphore import Semaphore
from seawall.stock._dedupe import claim_message, create_processed_table
from seawall.stock._orders import Balance, ReconcileReport
from seawall.stock._sync.idempotent import Idempotent
from seawall.stock._sync.sink import OrderSink
from seawall.stock._sync.stock import Stock

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
    "ClusterClientError",
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
