import redis

db = redis.Redis(socket_timeout=5.0)


def unindex(words: list[str], item: str) -> None:
    # Each word's set is dropped when the item was its last member, else the item leaves
    # it: the second command waits for the first one's answer.
    for word in words:
        if not db.zrange(f"word:{word}", 1, 2):
            db.delete(f"word:{word}")
        else:
            db.zrem(f"word:{word}", item)


def ensure_streams(keys: list[str]) -> None:
    for key in keys:
        if not db.exists(key):
            db.xadd(key, {"": ""}, id=b"0-1")


def titles(ids: list[str]) -> list[bytes]:
    found = []
    for item in ids:
        title = db.get(f"title:{item}")
        if title is not None:
            found.append(title)
    return found
