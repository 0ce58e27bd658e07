"""Many waiters in one process: their connections stay bounded, and all get through."""

from __future__ import annotations

import threading
import time

import redis
from conftest import Target

import seawall


def _connections(admin: redis.Redis, name: str) -> int:
    return sum(1 for c in admin.client_list() if c.get("name") == name)


def test_thousand_waiting_threads_use_at_most_three_connections(standalone: Target) -> None:
    admin = standalone.sync()
    holder = seawall.Lock(standalone.sync(), "crowd", ttl=30.0)
    holder.acquire()
    r = standalone.sync(client_name="crowd-waiters")
    acquired: list[int] = []
    errors: list[BaseException] = []
    start = threading.Barrier(1001)

    def wait(i: int) -> None:
        try:
            lock = seawall.Lock(r, "crowd", ttl=30.0)
            start.wait()
            if lock.acquire(timeout=60):
                acquired.append(i)
                lock.release()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=wait, args=(i,)) for i in range(1000)]
    for thread in threads:
        thread.start()
    start.wait()
    time.sleep(1.0)
    waiting = _connections(admin, "crowd-waiters")
    assert 1 <= waiting <= 3, f"{waiting} connections for 1,000 waiters"
    holder.release()
    for thread in threads:
        thread.join(120)
    assert errors == []
    assert len(acquired) == 1000
    # While 1,000 threads passed the lock along, a finished holder's release reply can still
    # be in flight when the next holder releases and the next waiter tries, and on a loaded
    # machine a thread that has its reply may wait several GIL turns before it hands its
    # connection back (7 seen once): a handful of connections, never one per thread.
    pool = r.connection_pool
    opened = len(pool._available_connections) + len(pool._in_use_connections)  # type: ignore[attr-defined]
    assert opened <= 16, f"the pool opened {opened} connections for 1,000 threads"
