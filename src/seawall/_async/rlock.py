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
the same RLock object, is not the owner and can neither release nor extend the hold.
"""

from __future__ import annotations

from seawall import _scripts
from seawall._async.holder import Hold
from seawall._async.lock import AsyncLock
from seawall._async.scripts import run_script
from seawall._concurrency import async_background, async_owner
from seawall._validate import check_timeout
from seawall.errors import LockNotOwnedError

_COUNT = _scripts.load("rlock_count")
_EXTEND = _scripts.load("rlock_extend")


class AsyncRLock(AsyncLock):
    """A reentrant lock shared by many processes; `fence` is per outermost acquisition.

    Same options and methods as seawall.aio.Lock. Acquiring again as the owner costs one
    round trip and never waits; each acquire needs its release, and the last release frees
    the lock and wakes a waiter.
    """

    _KIND = "rlock"
    _WHAT = "RLock"

    @property
    def holds_key(self) -> str:
        """The Redis hash of owner token -> hold count (present only while re-entered)."""
        return f"{self._keys.key}:holds"

    def _owned_hold(self) -> Hold | None:
        """The current hold if the caller (this asyncio task) is its owner."""
        hold = self._hold
        if hold is None or hold.released or hold.owner is not async_owner():
            return None
        return hold

    async def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        """Take the lock, or enter it once more if the caller holds it already.

        As for seawall.aio.Lock: True when taken, False when `timeout` passed (or not
        blocking). Re-entry never waits; it raises LockNotOwnedError if the lease was lost.
        """
        hold = self._owned_hold()
        if hold is None:
            return await super().acquire(blocking, timeout)
        check_timeout(timeout, "timeout")
        try:
            await self._record(hold, hold.depth + 1, "re-enter")
        except BaseException:
            # The count may have been recorded before the failure: put back the one held.
            self._resync_later(hold)
            raise
        hold.depth += 1
        return True

    async def release(self) -> None:
        """Undo one acquire; the last one frees the lock. Only the owner may release."""
        hold = self._owned_hold()
        if hold is None:
            raise self._not_the_owner("release")
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

    async def extend(self, ttl: float | None = None) -> None:
        """Reset the lease to `ttl` seconds from now; only the owner may extend it."""
        if self._owned_hold() is None:
            raise self._not_the_owner("extend")
        await super().extend(ttl)

    async def owned(self) -> bool:
        """Whether the caller (this asyncio task) holds the lock now, checked on the server."""
        return self._owned_hold() is not None and await super().owned()

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

        async_background(resync, f"recording the hold count of rlock {self.name!r}")

    async def _extend_token(self, token: str, ttl_ms: int) -> bool:
        keys = (self._keys.key, self.holds_key)
        return bool(int(await run_script(self._client, _EXTEND, keys, (token, ttl_ms))))

    def _not_the_owner(self, action: str) -> LockNotOwnedError:
        return LockNotOwnedError(
            f"cannot {action} rlock {self.name!r}: the current asyncio task does not hold it "
            "(it is free, or held by another thread, task or process). Only the owner that "
            "acquired an RLock may release or extend it",
            lock_name=self.name,
        )
