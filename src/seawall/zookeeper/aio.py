"""seawall.zookeeper.aio: the asyncio twin of seawall.zookeeper (same names, awaitable
methods; kazoo's replies are handed to the event loop, no thread blocks per waiter)."""

from __future__ import annotations

from seawall.zookeeper._async.lock import AsyncZooKeeperLock as Lock

__all__ = ["Lock"]
