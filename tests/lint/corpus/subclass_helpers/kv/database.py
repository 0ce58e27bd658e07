import redis

from kv import Autocomplete, Cache


class Database(redis.Redis):
    def cache(self, name: str = "cache") -> Cache:
        return Cache(self, name)

    def autocomplete(self, namespace: str) -> Autocomplete:
        return Autocomplete(self, namespace)

    def search(self, pattern: str) -> list[bytes]:
        return self.keys(pattern)
