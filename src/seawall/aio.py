"""The asyncio twins of seawall's public names: `await lock.acquire()`, `async with lock`."""

from __future__ import annotations

from seawall._async.fence import fenced_read, fenced_write
from seawall._async.lock import AsyncLock as Lock
from seawall._async.redlock import AsyncRedlock as Redlock
from seawall.errors import LockError, LockNotOwnedError, LockTimeout, SeawallError

__all__ = [
    "Lock",
    "LockError",
    "LockNotOwnedError",
    "LockTimeout",
    "Redlock",
    "SeawallError",
    "fenced_read",
    "fenced_write",
]
