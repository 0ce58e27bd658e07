import importlib
from typing import Any


class ClusterStorage:
    """Imports redis only when used, and keeps the module on an attribute."""

    def __init__(self, **options: Any) -> None:
        self.dependency = importlib.import_module("redis")
        self.storage = self.dependency.cluster.RedisCluster(**options)
        self.prefix = "limits:"

    def reset(self) -> int:
        count = 0
        for primary in self.storage.get_primaries():
            node = self.storage.get_redis_connection(primary)
            for name in node.keys(self.prefix + "*"):
                count += node.delete(name)
        return count
