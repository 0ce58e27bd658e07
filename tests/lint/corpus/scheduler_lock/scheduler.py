import time

import redis


class Scheduler:
    def __init__(self, connection, interval: int = 60) -> None:  # given by the caller
        self.connection = connection
        self.interval = interval
        self.lock_key = "scheduler:lock"

    def schedule(self, job_id: str, at: float) -> None:
        self.connection.zadd("scheduler:jobs", {job_id: at})

    def due(self) -> list[bytes]:
        return self.connection.zrangebyscore("scheduler:jobs", 0, time.time())

    def acquire_lock(self) -> bool:
        return bool(self.connection.set(self.lock_key, "1", nx=True, ex=self.interval + 10))

    def remove_lock(self) -> None:
        self.connection.delete(self.lock_key)


def connect(url: str) -> Scheduler:
    return Scheduler(redis.Redis.from_url(url, socket_timeout=5.0))
