"""seawall.etcd.aio: the asyncio twin of seawall.etcd (same names, awaitable methods)."""

from __future__ import annotations

from seawall.etcd._async.lock import AsyncEtcdLock as Lock
from seawall.etcd._core import EtcdError

__all__ = ["EtcdError", "Lock"]
