import typing as _t

from cachepkg.base import BaseRedisStore


class RedisStore(BaseRedisStore):
    def __init__(self, host: _t.Any = "localhost", prefix: str = "", **kwargs: _t.Any) -> None:
        if isinstance(host, str):
            try:
                import redis
            except ImportError as err:
                raise RuntimeError("redis is not installed") from err
            client = redis.Redis(host=host, socket_timeout=2.0, **kwargs)
        else:
            client = host
        super().__init__(client, prefix)
