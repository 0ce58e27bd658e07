from tasks.storage import RedisStorage


class TaskLock:
    """Held for the duration of a task, so that no two workers run it at once."""

    def __init__(self, storage: RedisStorage, name: str) -> None:
        self.storage = storage
        self.key = f"lock.{name}"

    def __enter__(self) -> "TaskLock":
        if not self.storage.put_if_empty(self.key, "1"):
            raise RuntimeError(f"{self.key} is held")
        return self

    def __exit__(self, *exc: object) -> None:
        self.storage.delete_data(self.key)


def store_result(storage: RedisStorage, task_id: str, value: str) -> bool:
    # The same helper used for what it is meant for: a result kept once, not a lock.
    return storage.put_if_empty(task_id, value)
