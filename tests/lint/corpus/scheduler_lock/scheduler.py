import redis


class Scheduler:
    def __init__(self, connection: redis.Redis, interval: int = 60) -> None:
        self.connection = connection
        self.interval = interval
        self.lock_key = "scheduler:lock"

    def acquire_lock(self) -> bool:
        return bool(self.connection.set(self.lock_key, "1", nx=True, ex=self.interval + 10))

    def remove_lock(self) -> None:
        self.connection.delete(self.lock_key)
