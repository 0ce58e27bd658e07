"""The asyncio twins of seawall's public names: `await lock.acquire()`, `async with lock`."""

from __future__ import annotations

from seawall._async.fence import fenced_read, fenced_write
from seawall._async.lock import AsyncLock as Lock
from seawall._async.stock import AsyncStock as Stock
from seawall.errors import (
    LockError,
    LockNotOwnedError,
    LockTimeout,
    OrderConflictError,
    SeawallError,
    StockError,
    StockQuantityError,
)

__all__ = [
    "Lock",
    "LockError",
    "LockNotOwnedError",
    "LockTimeout",
    "OrderConflictError",
    "SeawallError",
    "Stock",
    "StockError",
    "StockQuantityError",
    "fenced_read",
    "fenced_write",
]
