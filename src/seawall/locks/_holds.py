"""Who holds what through one lock object: holds and fences kept per owner.

A seawall lock object may be shared by the threads of a process (or the asyncio tasks of a
loop), as a `threading.Lock` is. Each owner (thread or task) then has holds of its own: an
owner whose lease lapsed while it paused keeps its own fence and its own token, so its late
release or extend fails (LockNotOwnedError) instead of acting on the hold another owner took
through the same object meanwhile. Pure bookkeeping, no I/O: every member of the lock family
(Lock, RLock, Semaphore, both RWLock sides, Redlock) keeps its holds in a `HoldTable`.
Who may be an owner at all is checked here too: a sync lock refuses a thread that runs an
asyncio event loop (`refuse_running_loop`).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref

from seawall.errors import LockError


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


def _gone(owner: object) -> bool:
    """Whether `owner` can never act again: a finished asyncio task or thread."""
    done = getattr(owner, "done", None)  # asyncio.Task
    if callable(done):
        return bool(done())
    alive = getattr(owner, "is_alive", None)  # threading.Thread
    return callable(alive) and not alive()


class HoldTable:
    """The holds taken through one object, by owner.

    An owner that is gone (a finished thread or task) can never release what it holds; its
    holds pass to the next owner that releases, extends or reads the fence while holding
    nothing itself. That is what `asyncio.wait_for(lock.acquire(), t)` needs on Python
    3.11 (it acquires in a task of its own), and what `threading.Lock` allows (a release
    from another thread). A live owner's holds are never taken over: a paused owner keeps
    its own, and its late release fails.
    """

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        # Owners with holds, strongly referenced until their holds are released or taken
        # over (a gone owner must stay recognisable as gone).
        self._holds: dict[object, list[Hold]] = {}
        # The fence each owner saw last; a collected owner cannot ask for it any more.
        self._last_fence: weakref.WeakKeyDictionary[object, int] = weakref.WeakKeyDictionary()

    def add(self, hold: Hold) -> None:
        """Record a hold just granted to `hold.owner`; its fence becomes the owner's."""
        with self._mutex:
            self._holds.setdefault(hold.owner, []).append(hold)
            self._remember(hold.owner, hold.fence)

    def current(self, owner: object, *, adopt: bool = False) -> Hold | None:
        """The newest hold `owner` has not released (it may have been lost), or None.
        With `adopt`, an owner holding nothing takes over the holds of gone owners."""
        with self._mutex:
            holds = self._adopted(owner) if adopt else self._holds.get(owner)
            return holds[-1] if holds else None

    def take(self, owner: object) -> Hold | None:
        """Remove `owner`'s newest hold (adopting gone owners' holds if it has none) and
        mark it released, at once: renewal stops and another acquire by the owner may
        follow, even if the release round trip that comes next is cancelled. None when
        the owner holds nothing here."""
        with self._mutex:
            holds = self._adopted(owner)
            if not holds:
                return None
            hold = holds.pop()
            if not holds:
                del self._holds[owner]
            hold.released = True
            return hold

    def fence(self, owner: object) -> int | None:
        """The fence of `owner`'s newest hold, else of the last hold it took; None if it
        never took one through this object (nor took over a gone owner's)."""
        with self._mutex:
            holds = self._adopted(owner)
            if holds:
                return holds[-1].fence
            return self._last_fence.get(owner)

    def count(self) -> int:
        """How many holds are taken through this object now, by every owner together."""
        with self._mutex:
            return sum(len(holds) for holds in self._holds.values())

    def _adopted(self, owner: object) -> list[Hold] | None:
        """`owner`'s holds; if it has none, those of every gone owner, now its own."""
        holds = self._holds.get(owner)
        if holds:
            return holds
        orphans: list[Hold] = []
        for other in [o for o in self._holds if o is not owner and _gone(o)]:
            orphans.extend(self._holds.pop(other))
        if not orphans:
            return holds
        for hold in orphans:
            hold.owner = owner
        self._holds[owner] = orphans
        self._remember(owner, orphans[-1].fence)
        return orphans

    def _remember(self, owner: object, fence: int) -> None:
        # An owner that cannot be weakly referenced keeps no history.
        with contextlib.suppress(TypeError):
            self._last_fence[owner] = fence


def asyncio_twin(public_name: str) -> str:
    """The asyncio class of a sync lock class: 'seawall.Lock' -> 'seawall.aio.Lock',
    'seawall.etcd.Lock' -> 'seawall.etcd.aio.Lock'."""
    package, _, name = public_name.rpartition(".")
    return f"{package}.aio.{name}"


def async_refuse_running_loop(label: str, lock_name: str, public_name: str) -> None:
    """An asyncio lock belongs on the event loop: nothing to refuse (the sync twin's
    counterpart, so one acquire serves both worlds)."""


def refuse_running_loop(label: str, lock_name: str, public_name: str) -> None:
    """Refuse a sync acquire on a thread that runs an asyncio event loop.

    A sync lock's owner is the thread, so every task of that loop would be one owner:
    the lock could not keep them apart (a plain Lock tells the second task it holds the
    lock already, an RLock lets it in), and a wait would block the loop, the holding task
    included. The asyncio twin, whose owner is the task, is what such code needs."""
    if asyncio._get_running_loop() is None:
        return
    raise LockError(
        f"{label} is a sync seawall lock, acquired on a thread that runs an asyncio event "
        "loop: its owner would be the thread, shared by every task of the loop (so it "
        "cannot keep them apart), and its waits would block the loop. Use "
        f"{asyncio_twin(public_name)} there (`async with lock:` or `await "
        "lock.acquire()`; the Redis locks take a redis.asyncio client), or acquire this "
        "one from a worker thread (asyncio.to_thread)",
        lock_name=lock_name,
    )
