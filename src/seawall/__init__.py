"""seawall: locks, caches and inventory that stay correct when many processes share Redis.

Sync API here; the asyncio twins of the same names live in `seawall.aio`.
"""

from __future__ import annotations

from seawall._sync.fence import fenced_read, fenced_write
from seawall._sync.lock import Lock
from seawall._sync.stock import Stock
from seawall.errors import (
    LockError,
    LockNotOwnedError,
    LockTimeout,
    OrderConflictError,
    SeawallError,
    ServerNotFoundError,
    StockError,
    StockQuantityError,
)
from seawall.launcher import server

__version__ = "0.1.0"

__all__ = [
    "Lock",
    "LockError",
    "LockNotOwnedError",
    "LockTimeout",
    "OrderConflictError",
    "SeawallError",
    "ServerNotFoundError",
    "Stock",
    "StockError",
    "StockQuantityError",
    "__version__",
    "fenced_read",
    "fenced_write",
    "server",
]
