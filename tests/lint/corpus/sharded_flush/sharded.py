import redis


class ShardedClient:
    def __init__(self, urls: dict[str, str]) -> None:
        self._servers = {}
        for name, url in urls.items():
            self._servers[name] = redis.Redis.from_url(url, socket_timeout=1.0)

    def clear(self) -> None:
        for server in self._servers.values():
            server.flushdb()


class LocalRegistry:
    def __init__(self) -> None:
        self._servers: dict[str, str] = {}

    def forget(self) -> list[str]:
        return list(self._servers.keys())
