import redis


class RedisStorage:
    def __init__(self, url: str) -> None:
        self.conn = redis.Redis.from_url(url, socket_timeout=10.0)

    def put_if_empty(self, key: str, value: str) -> bool:
        return bool(self.conn.setnx(f"results:{key}", value))

    def delete_data(self, key: str) -> None:
        self.conn.delete(f"results:{key}")
