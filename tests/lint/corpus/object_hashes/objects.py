import redis

r = redis.Redis(socket_timeout=1.0)


def save_job(job_id: str, status: str, created: float) -> None:
    r.hset(f"job:{job_id}", mapping={"status": status, "created": created})


def load_job(job_id: str) -> dict[bytes, bytes]:
    return r.hgetall(f"job:{job_id}")


def count_visit(page: str) -> None:
    r.hincrby("visits", page, 1)


def all_visits() -> dict[bytes, bytes]:
    return r.hgetall("visits")
