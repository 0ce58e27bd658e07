"""The in-process first level of seawall.Cache: bounded, short-lived, shared by threads/tasks.

An L1 hit does no I/O at all. Entries live at most `ttl` seconds (shorter than the Redis
level's, so a change elsewhere shows here soon even without an invalidation message) and
never past the logical expiry they had in Redis. When full, the least recently used entry
goes. Values are shared, not copied: callers must not mutate what the cache returns.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from seawall.shared import _concurrency

# Returned by `get` for a key it does not hold (None is a legitimate cached answer).
MISSING: Any = object()


class L1:
    """A thread-safe LRU map with a per-entry deadline on the monotonic clock."""

    def __init__(self, max_entries: int, ttl: float) -> None:
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 0:
            raise ValueError(
                f"l1_size must be an int >= 0 (0 turns the in-process level off), "
                f"got {max_entries!r}"
            )
        self.max_entries = max_entries
        self.ttl = ttl
        self._mutex = threading.Lock()
        self._entries: OrderedDict[str, tuple[float, Any]] = OrderedDict()
        # Moves on with every discard or clear. A value read from Redis is put only if no
        # invalidation came while it was being read (`put(..., epoch=)`): it might be the
        # very value that invalidation was about.
        self.epoch = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> Any:
        """The value held for `key`, or MISSING."""
        if not self._entries:
            # An L1 that is off (or empty) answers without the lock and the clock: on a
            # Redis hit with l1_size=0 they were a tenth of seawall's own time. Reading an
            # empty dict's size is atomic; a put racing with it is simply not seen yet.
            return MISSING
        now = _concurrency.monotonic()
        with self._mutex:
            found = self._entries.get(key)
            if found is None:
                return MISSING
            if found[0] <= now:
                return MISSING  # kept (until evicted) for get_stale
            self._entries.move_to_end(key)
            return found[1]

    def put(self, key: str, value: Any, ttl: float | None = None, epoch: int | None = None) -> None:
        """Hold `value` for min(ttl, the L1 ttl) seconds; if `epoch` is given, only if no
        invalidation came since `self.epoch` had that value."""
        if self.max_entries == 0:
            return
        lifetime = self.ttl if ttl is None else min(ttl, self.ttl)
        if lifetime <= 0:
            return
        deadline = _concurrency.monotonic() + lifetime
        with self._mutex:
            if epoch is not None and epoch != self.epoch:
                return
            self._entries[key] = (deadline, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def replace(self, entries: list[tuple[str, Any, float]], epoch: int | None) -> None:
        """After our own write of `entries` (key, value, ttl) to Redis: hold them, and move
        the epoch on, so a read that began before the write cannot store the old value
        afterwards. If anything was invalidated since `epoch` (taken before the write; None:
        not known) the entries are dropped instead: a later write may have replaced them.
        """
        now = _concurrency.monotonic()
        with self._mutex:
            keep = epoch is not None and epoch == self.epoch and self.max_entries > 0
            self.epoch += 1
            for key, value, ttl in entries:
                lifetime = min(ttl, self.ttl)
                if keep and lifetime > 0:
                    self._entries[key] = (now + lifetime, value)
                    self._entries.move_to_end(key)
                else:
                    self._entries.pop(key, None)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def get_stale(self, key: str, max_age: float) -> Any:
        """The value held for `key` even if expired up to `max_age` seconds ago, or MISSING.

        Only for when Redis is unreachable: a bounded-stale answer beats none.
        """
        now = _concurrency.monotonic()
        with self._mutex:
            found = self._entries.get(key)
            if found is None or found[0] + max_age <= now:
                return MISSING
            return found[1]

    def discard(self, key: str) -> None:
        """Forget `key` (a delete here or an invalidation message from another process)."""
        with self._mutex:
            self.epoch += 1
            self._entries.pop(key, None)

    def clear(self) -> None:
        """Expire everything (the invalidation channel was lost, so anything may be old).

        Entries are expired, not dropped: `get` no longer returns them, but `get_stale` may
        while Redis is unreachable (which is usually why the channel was lost).
        """
        now = _concurrency.monotonic()
        with self._mutex:
            self.epoch += 1
            for key, (deadline, value) in self._entries.items():
                if deadline > now:
                    self._entries[key] = (now, value)


class HotL1(L1):
    """An L1 that keeps only hot keys: for a Cache whose L1 is off (`l1_size=0`).

    The JD/Youzan hot-key design without extra servers: every process finds its hottest
    keys itself (`HotKeys`) and serves them from memory, while the usual invalidation
    broadcast keeps them correct; every other key is read from Redis as before.
    """

    def __init__(self, max_entries: int, ttl: float, is_hot: Callable[[str], bool]) -> None:
        super().__init__(max_entries, ttl)
        self._is_hot = is_hot

    def put(self, key: str, value: Any, ttl: float | None = None, epoch: int | None = None) -> None:
        if self._is_hot(key):
            super().put(key, value, ttl, epoch)

    def replace(self, entries: list[tuple[str, Any, float]], epoch: int | None) -> None:
        # Not-hot keys are still dropped (and the epoch moves on): only hot ones are held.
        hot = [entry for entry in entries if self._is_hot(entry[0])]
        cold = [(key, None, 0.0) for key, _, _ in entries if not self._is_hot(key)]
        super().replace(hot + cold, epoch)
