"""seawall.aio.RLock: a lock its owner (the asyncio task) may acquire again while holding it.

How it sits in Redis, and why:
- The lock key holds the outermost hold's token, a string, exactly as for seawall.Lock.
  The shared wake-up path (the waker, the pass-wake script, hand-offs to starving waiters)
  reads that key as a string, so the outermost acquire and the final release are Lock's
  own scripts: queueing, wake-ups, fences and `replicas=` work the same, unchanged.
- "<lock key>:holds" is a hash, owner token -> hold count, present while the owner holds
  the lock more than once. A re-entry or an inner release is one script (one round trip)
  that sets the count and checks on the way that the lease is still the owner's, so a
  re-entry into a lost lock fails instead of silently entering it.

The owner is tracked in this process: another thread or task of the process, even through
the same RLock object, is not the owner and can neither release nor extend the hold; it
takes (and waits for) a hold of its own through the shared object, as with threading.RLock.
"""

from __future__ import annotations

from seawall.locks._async.holder import Hold
from seawall.locks._async.lock import AsyncLock
from seawall.shared import _concurrency, _scripts
from seawall.shared._async.scripts import run_script
from seawall.shared._bounded import async_until, last_look
from seawall.shared._concurrency import async_run_soon
from seawall.shared._validate import check_acquire_wait

_COUNT = _scripts.load("seawall.locks", "rlock_count")
_EXTEND = _scripts.load("seawall.locks", "rlock_extend")


class AsyncRLock(AsyncLock):
    """A reentrant lock shared by many processes; `fence` is per outermost acquisition.

    Same options and methods as seawall.aio.Lock. Acquiring again as the owner costs one
    round trip and never waits; each acquire needs its release, and the last release frees
    the lock and wakes a waiter.
    """

    _PUBLIC = "seawall.aio.RLock"

    _KIND = "rlock"
    _WHAT = "RLock"

    @property
    def holds_key(self) -> str:
        """The Redis hash of owner token -> hold count (present only while re-entered)."""
        return f"{self._keys.key}:holds"

    async def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        """Take the lock, or enter it once more if the caller holds it already.

        As for seawall.aio.Lock: True when taken, False when `timeout` passed (or not
        blocking). Re-entry never waits; it raises LockNotOwnedError if the lease was lost.
        """
        # Re-entry is for the caller's own hold: a finished task's is taken over only by a
        # release (acquiring would enter it once more and leave it held). Checked first: a
        # sync RLock on an event loop's thread would let every task of the loop "re-enter".
        self._acquiring_owner()
        hold = self._current(adopt=False)
        if hold is None:
            return await super().acquire(blocking, timeout)
        wait_for = check_acquire_wait(blocking, timeout, self.timeout, self._label)
        deadline = None if wait_for is None else _concurrency.monotonic() + wait_for
        try:
            # Never waits for the lock, but the round trip is bounded by the timeout too.
            async with async_until(last_look(deadline)):
                await self._record(hold, hold.depth + 1, "re-enter")
        except TimeoutError:
            # No answer in time (a frozen server): not entered. The count may yet be
            # recorded when the server answers: put back the one held.
            self._resync_later(hold)
            return False
        except BaseException:
            # The count may have been recorded before the failure: put back the one held.
            self._resync_later(hold)
            raise
        hold.depth += 1
        return True

    async def release(self) -> None:
        """Undo one acquire; the last one frees the lock. Only the owner may release."""
        hold = self._current()
        if hold is None:
            raise self._not_held("release")
        if hold.depth == 1:
            await super().release()
            return
        # Counted down before the round trip: a cancelled release still counts as done.
        hold.depth -= 1
        try:
            await self._record(hold, hold.depth, "release")
        except BaseException:
            self._resync_later(hold)
            raise

    async def _record(self, hold: Hold, depth: int, action: str) -> None:
        keys = (self._keys.key, self.holds_key)
        if not int(await run_script(self._client, _COUNT, keys, (hold.token, depth))):
            self._mark_lost(hold, notify=False)
            raise self._not_owned(hold, action)

    def _resync_later(self, hold: Hold) -> None:
        async def resync() -> None:
            # The count held when this runs, not when it was scheduled: the owner may have
            # moved on meanwhile.
            if not hold.released and not hold.lost:
                keys = (self._keys.key, self.holds_key)
                await run_script(self._client, _COUNT, keys, (hold.token, hold.depth))

        # Alongside the caller, never in its time: the server may be frozen.
        async_run_soon(resync, f"recording the hold count of rlock {self.name!r}")

    async def _extend_token(self, token: str, ttl_ms: int, add: bool = False) -> int:
        keys = (self._keys.key, self.holds_key)
        args = (token, ttl_ms, "1" if add else "")
        return int(await run_script(self._client, _EXTEND, keys, args))
