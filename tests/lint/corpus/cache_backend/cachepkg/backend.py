from .connection import connect


class Cache:
    def __init__(self, url: str = "redis://localhost", prefix: str = "cache:") -> None:
        self._write_client = self._read_client = connect(url)
        self.prefix = prefix

    def add(self, key: str, value: bytes, timeout: int = 300) -> bool:
        name = self.prefix + key
        added = self._write_client.setnx(name, value)
        self._write_client.expire(name, timeout)
        return bool(added)

    def clear(self) -> bool:
        names = self._write_client.keys(self.prefix + "*")
        if names:
            self._write_client.delete(*names)
        return True

    def get(self, key: str) -> bytes | None:
        return self._read_client.get(self.prefix + key)
