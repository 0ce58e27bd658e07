"""The sync locks under comparison, each built the way its documentation shows.

Every contender gets the same lease (TTL seconds) and its library's default waiting
behaviour: redis-py polls every 0.1 s, python-redis-lock waits in BLPOP on a signal list,
pottery retries after a random delay, seawall waits for a pub/sub release signal.
"""

from __future__ import annotations

import os
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


class PubSubFloor:
    """The least a lock whose waiters are woken by pub/sub can do: not a usable lock.

    A try is SET NX PX; a waiter listens on the lock's channel in its own thread (no
    listener thread, no queue, no fence, no renewal) and tries again when told; release
    is one script, DEL and PUBLISH. A hand-over costs the release, the message and one
    SET: the floor under seawall.Lock's hand-over on the same machine.
    """

    _RELEASE = (
        "if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('del', KEYS[1]); "
        "return redis.call('publish', KEYS[1], '1') end return 0"
    )

    def __init__(self, client: redis.Redis, name: str) -> None:
        self._client = client
        self._name = f"floor:{name}"
        self._token = b""
        self._pubsub = client.pubsub(ignore_subscribe_messages=True)
        self._pubsub.subscribe(self._name)
        self._pubsub.get_message(timeout=1.0)  # the subscription's acknowledgement
        self._release = client.register_script(self._RELEASE)

    def acquire(self) -> bool:
        token = os.urandom(8).hex().encode()
        while not self._client.set(self._name, token, nx=True, px=int(TTL * 1000)):
            self._pubsub.get_message(timeout=1.0)  # woken by the release
        self._token = token
        return True

    def release(self) -> None:
        self._release(keys=[self._name], args=[self._token])


# Hand-over only: what the pub/sub design costs at the least (see PubSubFloor).
FLOOR_LOCKS: dict[str, Callable[[redis.Redis, str], SyncLock]] = {
    "floor: SET NX + pub/sub": PubSubFloor,
}


def make_lock(library: str, client: redis.Redis, name: str) -> SyncLock:
    return {**SYNC_LOCKS, **FLOOR_LOCKS}[library](client, name)


def key_name(run_id: str, library: str) -> str:
    """A lock name of its own for each library, so their keys never meet."""
    return f"{run_id}:{library.replace(' ', '-').replace('.', '-')}"
