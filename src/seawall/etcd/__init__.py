"""seawall.etcd: locks kept by etcd (Raft), with the API of seawall.Lock.

    import seawall.etcd
    with seawall.etcd.Lock("http://127.0.0.1:2379", "payments:42", ttl=10.0) as lock:
        ...  # lock.fence: the key's create revision, strictly increasing per name

asyncio: `seawall.etcd.aio.Lock`. Needs the `etcd` extra (httpx), see docs/cp-locks.md.
"""

from __future__ import annotations

try:
    import httpx  # noqa: F401 - fail here, naming the install command
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "seawall.etcd needs httpx, which the etcd extra installs: pip install 'seawall[etcd]'"
    ) from exc

from seawall.etcd._core import EtcdError
from seawall.etcd._sync.lock import EtcdLock as Lock

__all__ = ["EtcdError", "Lock"]
