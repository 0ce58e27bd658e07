import typing as _t


class BaseRedisStore:
    """Holds whatever client a subclass built; never imports redis itself."""

    _read_client: _t.Any = None
    _write_client: _t.Any = None

    def __init__(self, client: _t.Any, prefix: str = "") -> None:
        self._read_client = self._write_client = client
        self.prefix = prefix

    def add(self, key: str, value: bytes, timeout: int) -> bool:
        created = self._write_client.setnx(name=self.prefix + key, value=value)
        if created and timeout:
            self._write_client.expire(name=self.prefix + key, time=timeout)
        return bool(created)

    def clear(self) -> None:
        names = self._read_client.keys(self.prefix + "*")
        if names:
            self._write_client.delete(*names)
