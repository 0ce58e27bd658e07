"""One lease renewer per process (a thread) or per event loop (a task) for all held locks.

The renewer only keeps the schedule (a heap): each renewal that comes due runs on its own
(a task; a thread of a shared pool in sync code), bounded by its own lease, so a renewal
stuck on a frozen server delays no other hold's renewal.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import threading
import weakref
from typing import Protocol

from seawall.shared import _concurrency
from seawall.shared._concurrency import (
    AsyncEvent,
    AsyncWorker,
    ScopedRegistry,
    async_raise_if_cancelled,
    async_run_soon,
    async_scope,
)

# With nothing to renew the worker lingers this long before it exits, so a tight
# acquire/release loop does not start a thread per cycle.
IDLE_EXIT = 1.0


class AsyncRenewable(Protocol):
    async def _renew(self, hold: object) -> float | None:
        """Renew `hold`; return when to renew it next (monotonic), or None to stop."""


class _Entry:
    __slots__ = ("active", "hold", "lock")

    def __init__(self, lock: weakref.ref[AsyncRenewable], hold: object) -> None:
        self.lock = lock
        self.hold = hold
        self.active = True


class AsyncRenewer:
    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._heap: list[tuple[float, int, _Entry]] = []
        self._entries: dict[int, _Entry] = {}  # id(hold) -> entry, for discard()
        self._order = itertools.count()
        self._changed = AsyncEvent()
        self._worker: AsyncWorker | None = None
        # When the worker will look next (None: it waits for work). A new entry due later
        # needs no wake-up, which keeps a tight acquire/release loop from waking the worker
        # on every cycle.
        self._wake_at: float | None = None
        self._dead = 0  # inactive entries still in the heap

    def add(self, lock: AsyncRenewable, hold: object, due: float) -> None:
        """Renew `hold` of `lock` at `due`, and then as `lock._renew` says, until discarded.

        Only a weak reference to the lock is kept: a lock object that is garbage collected
        while held stops being renewed and its lease runs out.
        """
        entry = _Entry(weakref.ref(lock), hold)
        with self._mutex:
            self._entries[id(hold)] = entry
            heapq.heappush(self._heap, (due, next(self._order), entry))
            if self._worker is None or not self._worker.alive():
                self._worker = AsyncWorker(self._run, "seawall-renewer")
            elif self._wake_at is not None and self._wake_at <= due:
                return
        self._changed.set()

    def reschedule(self, hold: object, due: float) -> None:
        """Move the next renewal of `hold` (after a manual extend)."""
        with self._mutex:
            old = self._entries.get(id(hold))
            if old is None or not old.active:
                return
            old.active = False
            self._dead += 1
            entry = _Entry(old.lock, hold)
            self._entries[id(hold)] = entry
            heapq.heappush(self._heap, (due, next(self._order), entry))
        self._changed.set()

    def discard(self, hold: object) -> None:
        """Stop renewing `hold`. Never waits: safe before the release round trip."""
        with self._mutex:
            entry = self._entries.pop(id(hold), None)
            if entry is not None:
                entry.active = False
                self._dead += 1
                if self._dead > 64 and self._dead * 2 > len(self._heap):
                    # Discarded entries are left in the heap until they come due; compact
                    # it now and then, so a tight acquire/release loop does not grow it.
                    self._heap = [item for item in self._heap if item[2].active]
                    heapq.heapify(self._heap)
                    self._dead = 0

    def active(self) -> int:
        """How many holds are being renewed (those of garbage-collected locks not counted)."""
        with self._mutex:
            return sum(1 for entry in self._entries.values() if entry.lock() is not None)

    def _next_due(self) -> tuple[float | None, list[_Entry]]:
        now = _concurrency.monotonic()
        due: list[_Entry] = []
        with self._mutex:
            while self._heap and (self._heap[0][0] <= now or not self._heap[0][2].active):
                _, _, entry = heapq.heappop(self._heap)
                if entry.active:
                    due.append(entry)
                else:
                    self._dead = max(self._dead - 1, 0)
            wake_at = self._heap[0][0] if self._heap else None
            # While renewals are due, the worker comes back at once; otherwise it sleeps
            # until wake_at (or, with nothing to renew, until woken).
            self._wake_at = now if due else wake_at
        return wake_at, due

    async def _run(self) -> None:
        while True:
            async_raise_if_cancelled()  # in the sync twin: the interpreter is exiting
            # Clear before looking, so an add() racing with this pass is never missed.
            self._changed.clear()
            wake_at, due = self._next_due()
            for entry in due:
                # Each on its own: a renewal waiting on a frozen server (up to its lease)
                # must not hold up the others. Until it ends its entry is off the heap.
                async_run_soon(functools.partial(self._renew_one, entry), "seawall-renewal")
            if due:
                continue
            if wake_at is not None:
                await self._changed.wait(max(wake_at - _concurrency.monotonic(), 0.0))
                continue
            with self._mutex:
                # Idle, it looks again by itself after IDLE_EXIT: work due later than that
                # needs no wake-up (in a tight acquire/release loop, none ever does).
                self._wake_at = _concurrency.monotonic() + IDLE_EXIT
            if not await self._changed.wait(IDLE_EXIT):
                with self._mutex:
                    if not self._entries:
                        self._heap.clear()
                        self._dead = 0
                        self._worker = None
                        return

    async def _renew_one(self, entry: _Entry) -> None:
        lock = entry.lock()
        if lock is None:
            self.discard(entry.hold)
            return
        try:
            due = await lock._renew(entry.hold)
        except Exception as exc:  # a bug in one lock must not stop the renewal of the others
            _concurrency.log.exception("renewal failed unexpectedly: %r", exc)
            due = None
        with self._mutex:
            if not entry.active:
                return
            if due is None:
                entry.active = False
                self._entries.pop(id(entry.hold), None)
                return
            heapq.heappush(self._heap, (due, next(self._order), entry))
            if self._wake_at is not None and self._wake_at <= due:
                return
        self._changed.set()  # due before the worker looks next


_registry = ScopedRegistry()


def get_renewer() -> AsyncRenewer:
    """The renewer of the running event loop."""
    here = async_scope()
    return _registry.get(here, here, AsyncRenewer)
