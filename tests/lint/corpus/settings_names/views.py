from app.settings import REDIS, REDIS_URL


def describe() -> list[str]:
    return [REDIS_URL, *REDIS.keys()]
