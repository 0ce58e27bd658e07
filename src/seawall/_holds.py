"""Who holds what through one lock object: holds and fences kept per owner.

A seawall lock object may be shared by the threads of a process (or the asyncio tasks of a
loop), as a `threading.Lock` is. Each owner (thread or task) then has holds of its own: an
owner whose lease lapsed while it paused keeps its own fence and its own token, so its late
release or extend fails (LockNotOwnedError) instead of acting on the hold another owner took
through the same object meanwhile. Pure bookkeeping, no I/O: every member of the lock family
(Lock, RLock, Semaphore, both RWLock sides, Redlock) keeps its holds in a `HoldTable`.
"""

from __future__ import annotations

import threading
import weakref


class Hold:
    """One acquisition: its token, fence and lease bookkeeping."""

    __slots__ = ("deadline", "depth", "fence", "lost", "owner", "released", "token", "ttl")

    def __init__(self, token: str, fence: int, owner: object, ttl: float, deadline: float) -> None:
        self.token = token
        self.fence = fence
        self.owner = owner
        self.ttl = ttl
        # Monotonic time by which the lease has surely lapsed (Redlock: its validity ends).
        self.deadline = deadline
        self.lost = False
        self.released = False
        self.depth = 1  # times the owner holds it (only seawall.RLock enters more than once)


class _Owned:
    """One owner's holds through one object (newest last) and the fence it saw last."""

    __slots__ = ("holds", "last_fence")

    def __init__(self) -> None:
        self.holds: list[Hold] = []
        self.last_fence: int | None = None


class HoldTable:
    """The holds taken through one object, by owner.

    Owners are weakly referenced: a finished thread or task takes its entry with it (the
    lease of a hold it never released runs out on the server).
    """

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._owners: weakref.WeakKeyDictionary[object, _Owned] = weakref.WeakKeyDictionary()

    def add(self, hold: Hold) -> None:
        """Record a hold just granted to `hold.owner`; its fence becomes the owner's."""
        with self._mutex:
            owned = self._owners.get(hold.owner)
            if owned is None:
                owned = self._owners[hold.owner] = _Owned()
            owned.holds.append(hold)
            owned.last_fence = hold.fence

    def current(self, owner: object) -> Hold | None:
        """The newest hold `owner` has not released (it may have been lost), or None."""
        with self._mutex:
            owned = self._owners.get(owner)
            return owned.holds[-1] if owned is not None and owned.holds else None

    def take(self, owner: object) -> Hold | None:
        """Remove `owner`'s newest hold and mark it released, at once: renewal stops and
        another acquire by the owner may follow, even if the release round trip that comes
        next is cancelled. None when the owner holds nothing here."""
        with self._mutex:
            owned = self._owners.get(owner)
            if owned is None or not owned.holds:
                return None
            hold = owned.holds.pop()
            hold.released = True
            return hold

    def fence(self, owner: object) -> int | None:
        """The fence of `owner`'s newest hold, else of the last hold it took; None if it
        never took one through this object."""
        with self._mutex:
            owned = self._owners.get(owner)
            if owned is None:
                return None
            return owned.holds[-1].fence if owned.holds else owned.last_fence

    def count(self) -> int:
        """How many holds are taken through this object now, by every owner together."""
        with self._mutex:
            return sum(len(owned.holds) for owned in self._owners.values())
