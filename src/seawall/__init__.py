"""seawall: locks, caches and inventory that stay correct when many processes share Redis.

Sync API here; the asyncio twins of the same names live in `seawall.aio`.
"""

from __future__ import annotations

from seawall._dedupe import claim_message, create_processed_table
from seawall._orders import Balance, ReconcileReport
from seawall._sync.fence import fenced_read, fenced_write
from seawall._sync.idempotent import Idempotent
from seawall._sync.lock import Lock
from seawall._sync.sink import OrderSink
from seawall._sync.stock import Stock
from seawall.errors import (
    DrainTimeout,
    IdempotencyTimeout,
    LockError,
    LockNotOwnedError,
    LockTimeout,
    OrderConflictError,
    OrderSinkError,
    SeawallError,
    ServerNotFoundError,
    StockError,
    StockQuantityError,
)
from seawall.launcher import server

__version__ = "0.1.0"

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
    "ServerNotFoundError",
    "Stock",
    "StockError",
    "StockQuantityError",
    "__version__",
    "claim_message",
    "create_processed_table",
    "fenced_read",
    "fenced_write",
    "server",
]
