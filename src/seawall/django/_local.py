"""What the RedisCache instances of one process share per Redis location: the redis-py
clients (with their connection pools and get_or_set's wake-up listener), the in-process
L1 with its invalidation listener, and the circuit breaker.

Django makes one cache instance per thread (`caches["default"]` is thread-local, and
per request context under ASGI), so a client, an L1 or a breaker per instance would be
one per thread: each new thread would open its own connections and its own pub/sub
listener before its first answer, a value read by one thread would not serve the next,
and a dead Redis would be tried `failure_threshold` times by every thread. They are kept
here instead, one per (location, options) and per process (the asyncio clients one per
event loop too); a forked child (a gunicorn worker of a preloaded app) starts with none,
as its parent's connections are not its own and what its parent held was never
invalidated in it.

The L1 holds the bytes Redis held, decoded on each hit: a caller changing what get()
returned never changes what the next caller gets (Django's backends give each caller its
own copy; an L1 hit still costs no I/O). It is kept right across processes by
seawall.Cache's invalidation listener (one subscriber connection per process): every
write through the backend publishes the keys it changed, and every process drops them.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable, Hashable, Iterable
from typing import Any, TypeVar

from seawall.cache import _invalidation_message as message_format
from seawall.cache._l1 import L1, MISSING
from seawall.cache._sync.invalidation import Invalidator, get_invalidator

__all__ = ["MISSING", "LocalLevel", "invalidation", "per_loop", "shared"]

# The invalidation namespace of every seawall.django cache: the keys it names are made
# keys (KEY_PREFIX and VERSION in them), so caches with different prefixes never clash.
NAMESPACE = "django"

_T = TypeVar("_T")
_mutex = threading.Lock()
_shared: dict[Hashable, Any] = {}


def shared(key: Hashable, make: Callable[[], _T]) -> _T:
    """The object made by `make` for `key` in this process (made once)."""
    found = _shared.get(key)
    if found is None:
        with _mutex:
            found = _shared.get(key)
            if found is None:
                found = _shared[key] = make()
    return found


def per_loop(key: Hashable, loop: Any, make: Callable[[], _T]) -> _T:
    """The object made by `make` for `key` and event loop `loop` in this process (made
    once per loop; those of loops closed meanwhile are dropped)."""
    loops: dict[Any, Any] = shared(key, dict)
    found = loops.get(loop)
    if found is None:
        with _mutex:
            found = loops.get(loop)
            if found is None:
                for closed in [other for other in loops if other.is_closed()]:
                    del loops[closed]
                found = loops[loop] = make()
    return found


# The sender of invalidations published by no L1 of this process (see invalidation()):
# never an L1 listener's own id, so every listener acts on them, this process's too.
_NO_L1_SENDER = uuid.uuid4().hex


def invalidation(keys: Iterable[str]) -> tuple[str, str] | None:
    """The (channel, message) that drops `keys` from the L1 of every process, for a
    writer with no L1 of its own (second deletes, the change-log follower): they must
    reach the L1s of other caches and processes all the same. None: no key."""
    keys = list(keys)
    if not keys:
        return None
    if len(keys) == 1:
        body = message_format.encode(_NO_L1_SENDER, message_format.DISCARD, keys[0])
    else:
        body = message_format.encode_many(_NO_L1_SENDER, keys)
    return message_format.channel(NAMESPACE), body


def _forget_at_fork() -> None:
    _shared.clear()


os.register_at_fork(after_in_child=_forget_at_fork)


class LocalLevel:
    """An L1 of raw values, emptied by the writes of every process."""

    def __init__(self, client: Any, size: int, ttl: float) -> None:
        self.l1 = L1(size, ttl)
        self._client = client  # the invalidator holds it weakly
        self.invalidator: Invalidator = get_invalidator(client)
        self.invalidator.register(NAMESPACE, self.l1)

    def get(self, key: str) -> Any:
        """The raw value held for `key`, or MISSING."""
        return self.l1.get(key)

    def fill_epoch(self) -> int | None:
        """Taken before reading Redis; None: the L1 must not be filled (the listener is
        not subscribed, so an invalidation could be missed)."""
        return self.l1.epoch if self.invalidator.listening else None

    def fill(self, key: str, raw: bytes, pttl: int, epoch: int | None) -> None:
        """Hold what Redis answered (with its PTTL) if nothing was invalidated meanwhile;
        never past the key's expiry in Redis."""
        if epoch is None or pttl == -2 or not self.invalidator.listening:
            return
        self.l1.put(key, raw, None if pttl < 0 else pttl / 1000, epoch)

    def get_stale(self, key: str, max_age: float) -> Any:
        return self.l1.get_stale(key, max_age)

    def dropped(self, keys: Iterable[str]) -> tuple[str, str] | None:
        """Drop `keys` here; the (channel, message) to PUBLISH so every other process
        drops them too (None: no key)."""
        keys = list(keys)
        if not keys:
            return None
        self.invalidator.discard_local(NAMESPACE, *keys)
        sender = self.invalidator.id
        if len(keys) == 1:
            body = message_format.encode(sender, message_format.DISCARD, keys[0])
        else:
            body = message_format.encode_many(sender, keys)
        return message_format.channel(NAMESPACE), body

    def cleared(self) -> tuple[str, str]:
        """Empty the L1 here; the (channel, message) that empties every other process's."""
        self.invalidator.clear_local(NAMESPACE)
        body = message_format.encode(self.invalidator.id, message_format.CLEAR)
        return message_format.channel(NAMESPACE), body
