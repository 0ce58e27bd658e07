import redis


def connect(url: str):
    return redis.Redis.from_url(url, socket_timeout=2.0)
