"""The sync locks under comparison, each built the way its documentation shows.

Every contender gets the same lease (TTL seconds) and its library's default waiting
behaviour: redis-py polls every 0.1 s, python-redis-lock waits in BLPOP on a signal list,
pottery retries after a random delay, seawall waits for a pub/sub release signal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import pottery
import redis
import redis_lock

import seawall

TTL = 30.0


class SyncLock(Protocol):
    def acquire(self) -> Any: ...

    def release(self) -> Any: ...


def _seawall(client: redis.Redis, name: str) -> SyncLock:
    return seawall.Lock(client, name, ttl=TTL)


def _redis_py(client: redis.Redis, name: str) -> SyncLock:
    # The default sleep=0.1: what `r.lock(name, timeout=...)` gives users.
    lock: SyncLock = client.lock(name, timeout=TTL)
    return lock


def _python_redis_lock(client: redis.Redis, name: str) -> SyncLock:
    lock: SyncLock = redis_lock.Lock(client, name, expire=int(TTL))
    return lock


def _pottery(client: redis.Redis, name: str) -> SyncLock:
    # One master: the single-server use of pottery's Redlock.
    lock: SyncLock = pottery.Redlock(key=name, masters={client}, auto_release_time=TTL)
    return lock


SYNC_LOCKS: dict[str, Callable[[redis.Redis, str], SyncLock]] = {
    "seawall.Lock": _seawall,
    "redis-py Lock": _redis_py,
    "python-redis-lock": _python_redis_lock,
    "pottery Redlock": _pottery,
}


def make_lock(library: str, client: redis.Redis, name: str) -> SyncLock:
    return SYNC_LOCKS[library](client, name)


def key_name(run_id: str, library: str) -> str:
    """A lock name of its own for each library, so their keys never meet."""
    return f"{run_id}:{library.replace(' ', '-').replace('.', '-')}"
