import redis


class TaskLock:
    def __init__(self, conn: redis.Redis, name: str) -> None:
        self.conn = conn
        self.key = f"task-lock:{name}"

    def acquire(self) -> bool:
        return bool(self.conn.setnx(self.key, "1"))

    def release(self) -> None:
        self.conn.delete(self.key)
