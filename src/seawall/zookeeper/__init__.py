"""seawall.zookeeper: locks kept by ZooKeeper (ZAB), with the API of seawall.Lock.

    import seawall.zookeeper
    with seawall.zookeeper.Lock("127.0.0.1:2181", "payments:42") as lock:
        ...  # lock.fence: the node's czxid, strictly increasing per name

asyncio: `seawall.zookeeper.aio.Lock`. Needs the `zookeeper` extra (kazoo), see
docs/cp-locks.md.
"""

from __future__ import annotations

try:
    import kazoo  # noqa: F401 - fail here, naming the install command
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "seawall.zookeeper needs kazoo, which the zookeeper extra installs: "
        "pip install 'seawall[zookeeper]'"
    ) from exc

from seawall.zookeeper._sync.lock import ZooKeeperLock as Lock

__all__ = ["Lock"]
