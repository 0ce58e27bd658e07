import redis

connection = redis.Redis(socket_timeout=10.0)


def dequeue(queue_names: list[str]) -> tuple[str, bytes] | None:
    # Queues in priority order: the first job found wins, the others stay queued.
    for name in queue_names:
        job_id = connection.lpop(f"queue:{name}")
        if job_id is not None:
            return name, job_id
    return None


def requeue_all(job_ids: list[str]) -> None:
    for job_id in job_ids:
        connection.rpush("queue:default", job_id)


class Queue:
    """Holds the connection a registry's pipelines come from."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.connection = connection
