import redis

queue = redis.Redis(host="queue")


def work() -> None:
    while True:
        item = queue.blpop(["jobs"], timeout=5)
        if item is not None:
            print(item)
