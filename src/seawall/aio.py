"""The asyncio twins of seawall's public names: `await lock.acquire()`, `async with lock`."""

from __future__ import annotations

from seawall._async.fence import fenced_read, fenced_write
from seawall._async.idempotent import AsyncIdempotent as Idempotent
from seawall._async.lock import AsyncLock as Lock
from seawall._async.sink import AsyncOrderSink as OrderSink
from seawall._async.stock import AsyncStock as Stock
from seawall._orders import Balance, ReconcileReport
from seawall.errors import (
    DrainTimeout,
    IdempotencyTimeout,
    LockError,
    LockNotOwnedError,
    LockTimeout,
    OrderConflictError,
    OrderSinkError,
    SeawallError,
    StockError,
    StockQuantityError,
)

__all__ = [
    "Balance",
    "DrainTimeout",
    "IdempotencyTimeout",
    "Idempotent",
    "Lock",
    "LockError",
    "LockNotOwnedError",
    "LockTimeout",
    "OrderConflictError",
    "OrderSink",
    "OrderSinkError",
    "ReconcileReport",
    "SeawallError",
    "Stock",
    "StockError",
    "StockQuantityError",
    "fenced_read",
    "fenced_write",
]
