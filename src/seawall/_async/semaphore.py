"""seawall.aio.Semaphore: at most `value` holders, each with its own lease; fair waiting."""

from __future__ import annotations

import functools
import secrets
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any

from redis.exceptions import RedisError

from seawall import _concurrency, _lease, _scripts
from seawall._async.lock import QUEUE_TTL_MS, _Hold, _ms, _remaining
from seawall._async.renewer import get_renewer
from seawall._async.replication import run_script_replicated
from seawall._async.scripts import run_script
from seawall._async.waker import AsyncWaker, get_waker
from seawall._concurrency import (
    async_background,
    async_fire,
    async_owner,
    async_scope,
    async_time_limit,
)
from seawall._keys import WAKE_PREFIX, semaphore_keys
from seawall._replication import DEFAULT_REPLICA_TIMEOUT, replica_policy
from seawall._validate import (
    check_async_client,
    check_name,
    check_permits,
    check_seconds,
    check_timeout,
)
from seawall.errors import LockError, LockNotOwnedError, LockTimeout

_ACQUIRE = _scripts.load("semaphore_acquire")
_RELEASE = _scripts.load("semaphore_release")
_EXTEND = _scripts.load("semaphore_extend")
_STATE = _scripts.load("semaphore_state")

# A queued process tries again at least this often, which keeps its place in the queue;
# one that has not tried for WAITER_LAPSE (killed, paused) is dropped from the queue, so a
# dead waiter holds up the processes behind it for at most that long.
WAITER_SLICE = 0.4
WAITER_LAPSE_MS = 1_500


class AsyncSemaphore:
    """A counting semaphore shared by many processes: at most `value` permits are held.

    Each object holds at most one permit at a time (like one Lock object): give every
    thread or task that needs a permit its own Semaphore object, all with the same name.
    Each holder's lease is its own, timed by the server's clock and renewed at ttl/3 while
    held; a holder that dies gives its permit back when its lease ends. Waiting processes
    are served in arrival order: a newcomer never takes a permit a queued process waits for.
    With `replicas=N` a permit counts only once N replicas acknowledged it.
    """

    def __init__(
        self,
        client: Any,
        name: str,
        value: int = 3,
        ttl: float = 30.0,
        *,
        timeout: float | None = None,
        renew: bool = True,
        on_lost: Callable[[AsyncSemaphore], Any] | None = None,
        replicas: int = 0,
        replica_timeout: float = DEFAULT_REPLICA_TIMEOUT,
    ) -> None:
        self._client = check_async_client(client, "Semaphore")
        self.name = check_name(name, "Semaphore")
        self.value = check_permits(value, f"value of semaphore {name!r}")
        self.ttl = check_seconds(ttl, f"ttl of semaphore {name!r}")
        self.timeout = check_timeout(timeout, f"timeout of semaphore {name!r}")
        if on_lost is not None and not callable(on_lost):
            raise TypeError(f"on_lost of semaphore {name!r} must be callable, got {on_lost!r}")
        self._renew_leases = bool(renew)
        self._on_lost = on_lost
        self._replication = replica_policy(replicas, replica_timeout, f"semaphore {name!r}")
        self._keys = semaphore_keys(name)
        self._ttl_ms = _ms(self.ttl)
        self._hold: _Hold | None = None
        self._last_fence: int | None = None
        self._busy = False  # an acquire through this object is under way
        self._mutex = threading.Lock()  # guards _busy and _hold against a racing thread
        self._waker: tuple[object, AsyncWaker] | None = None  # (scope, waker) of last use

    def __repr__(self) -> str:
        state = "holding a permit" if self._hold is not None else "holding no permit"
        return f"<seawall.Semaphore {self.name!r} value={self.value} ttl={self.ttl}s {state}>"

    @property
    def key(self) -> str:
        """The Redis key (a sorted set) of the holders' tokens, scored by lease end."""
        return self._keys.key

    @property
    def fence(self) -> int:
        """Fencing token of the current (or last) permit; strictly increasing per name."""
        if self._last_fence is None:
            raise LockError(
                f"semaphore {self.name!r} has no fence yet: acquire it first",
                lock_name=self.name,
            )
        return self._last_fence

    async def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        """Take a permit; True when taken, False when `timeout` passed (or not blocking).

        `timeout` defaults to the one given to the constructor (None: wait as long as it
        takes). Waiting costs no polling: a release wakes the oldest waiters.
        """
        wait_for = self.timeout if timeout is None else check_timeout(timeout, "timeout")
        me = async_owner()
        with self._mutex:
            if self._hold is not None or self._busy:
                raise LockError(
                    f"this Semaphore object for {self.name!r} already holds a permit (or is "
                    "acquiring one); each object holds at most one: create one Semaphore "
                    "object per thread or task, all with the same name",
                    lock_name=self.name,
                )
            self._busy = True
        try:
            token = secrets.token_hex(16)
            if not blocking:
                return await self._attempt(token, me) is None
            return await self._wait(token, me, wait_for)
        finally:
            with self._mutex:
                self._busy = False

    async def _wait(self, token: str, me: object, wait_for: float | None) -> bool:
        deadline = None if wait_for is None else _concurrency.monotonic() + wait_for
        async with self._get_waker().turn(self._keys.key) as turn:
            if not await turn.wait_turn(_remaining(deadline)):
                return False
            place = ""  # this process's place in the queue, kept across tries
            while True:
                waiter_id = turn.waiter_id
                turn.rearm()
                if waiter_id is not None:
                    turn.queueing()
                outcome = await self._attempt(token, me, waiter_id or "", place)
                if outcome is None:
                    if waiter_id is not None:
                        turn.dequeued()
                    return True
                wait_ms, place = outcome
                remaining = _remaining(deadline)
                if remaining is not None and remaining <= 0:
                    return False
                if waiter_id is None:
                    # Listen first, then try again queued: a release between the failed
                    # attempt and the queueing would otherwise wake nobody here.
                    await turn.listen(min(remaining, 1.0) if remaining is not None else 1.0)
                    continue
                # Look again when a lease or a queued process may lapse, and at least every
                # WAITER_SLICE, which also keeps this process's place in the queue.
                pause = min(_lease.wait_slice(wait_ms, remaining), WAITER_SLICE)
                await turn.wait_signal(pause)

    def _get_waker(self) -> AsyncWaker:
        here = async_scope()
        cached = self._waker
        if cached is None or cached[0] is not here:
            cached = self._waker = (here, get_waker(self._client))
        return cached[1]

    async def _attempt(
        self, token: str, me: object, waiter_id: str = "", place: str = ""
    ) -> tuple[int, str] | None:
        """One try; None when acquired, else (ms until something lapses, our place)."""
        keys = self._keys
        script_keys = (keys.key, keys.fence, keys.waiters, keys.seen)
        args = (token, self.value, self._ttl_ms, waiter_id, WAITER_LAPSE_MS, QUEUE_TTL_MS, place)
        policy = self._replication
        sent = _concurrency.monotonic()
        acked = 0
        try:
            if policy is None:
                reply = await run_script(self._client, _ACQUIRE, script_keys, args)
            else:
                reply, acked = await run_script_replicated(
                    self._client, _ACQUIRE, script_keys, args, policy
                )
        except BaseException:
            # Cancelled or failed mid-flight: the server may have granted the permit. Give
            # it back (a no-op if it was not granted) and never start renewing it.
            async_background(
                functools.partial(self._release_token, token),
                f"cleanup of semaphore {self.name!r}",
            )
            raise
        if int(reply[0]) != 1:
            return int(reply[1]), _scripts.reply_text(reply[2])
        if policy is not None and not policy.enough(acked):
            # Granted, but a failover now could lose it: give it back with the usual
            # release, which wakes the oldest waiters, rather than hold a permit the
            # promoted replica may not know about.
            try:
                await self._release_token(token)
            except BaseException:
                async_background(
                    functools.partial(self._release_token, token),
                    f"release of semaphore {self.name!r}",
                )
                raise
            raise policy.error("a permit of semaphore", self.name, acked)
        hold = _Hold(token, int(reply[1]), me, self.ttl, _lease.lease_deadline(sent, self.ttl))
        with self._mutex:
            self._hold = hold
        self._last_fence = hold.fence
        if self._renew_leases:
            get_renewer().add(self, hold, _lease.renew_at(sent, self.ttl))
        return None

    async def _release_token(self, token: str) -> int:
        keys = self._keys
        reply = await run_script(
            self._client, _RELEASE, keys.queue, (token, self.value, WAKE_PREFIX)
        )
        return int(reply)

    async def release(self) -> None:
        """Give the permit back; LockNotOwnedError if this object does not hold one now."""
        with self._mutex:
            hold = self._hold
            if hold is None:
                raise LockNotOwnedError(
                    f"semaphore {self.name!r}: this Semaphore object holds no permit (never "
                    "acquired, or already released); only the holder may release its permit",
                    lock_name=self.name,
                )
            # Bookkeeping first, with no await before it: renewal must stop even if this
            # release is cancelled, and another acquire through this object may follow.
            hold.released = True
            self._hold = None
        if self._renew_leases:
            get_renewer().discard(hold)
        try:
            released = await self._release_token(hold.token)
        except BaseException:
            async_background(
                functools.partial(self._release_token, hold.token),
                f"release of semaphore {self.name!r}",
            )
            raise
        if not released:
            raise self._not_owned(hold, "release")

    async def extend(self, ttl: float | None = None) -> None:
        """Reset this holder's lease to `ttl` seconds (default: the semaphore's) from now."""
        hold = self._hold
        if hold is None:
            raise LockNotOwnedError(
                f"cannot extend semaphore {self.name!r}: this Semaphore object holds no permit",
                lock_name=self.name,
            )
        new_ttl = (
            hold.ttl if ttl is None else check_seconds(ttl, f"ttl of semaphore {self.name!r}")
        )
        sent = _concurrency.monotonic()
        extended = await run_script(
            self._client, _EXTEND, (self._keys.key,), (hold.token, _ms(new_ttl))
        )
        if not int(extended):
            self._mark_lost(hold, notify=False)
            raise self._not_owned(hold, "extend")
        hold.ttl = new_ttl
        hold.deadline = _lease.lease_deadline(sent, new_ttl)
        if self._renew_leases:
            get_renewer().reschedule(hold, _lease.renew_at(sent, new_ttl))

    async def owned(self) -> bool:
        """Whether this object holds a permit now (checked on the server)."""
        hold = self._hold
        if hold is None or hold.lost or _concurrency.monotonic() >= hold.deadline:
            return False
        _, left = await self._state(hold.token)
        return left > 0

    async def holders(self) -> int:
        """How many permits are held now, by the server's clock (lapsed leases not counted)."""
        live, _ = await self._state("")
        return live

    async def available(self) -> int:
        """How many permits are free now; may be 0 or less if another object used a
        smaller `value` for the same name."""
        return self.value - await self.holders()

    async def _state(self, token: str) -> tuple[int, int]:
        reply = await run_script(self._client, _STATE, (self._keys.key,), (token,))
        return int(reply[0]), int(reply[1])

    async def _renew(self, hold: object) -> float | None:
        """Called by the renewer: extend the lease; return when to renew next, or None."""
        assert isinstance(hold, _Hold)
        if hold.released or hold.lost:
            return None
        sent = _concurrency.monotonic()
        if sent >= hold.deadline:
            self._mark_lost(hold)
            return None
        try:
            async with async_time_limit(hold.deadline - sent):
                extended = await run_script(
                    self._client, _EXTEND, (self._keys.key,), (hold.token, _ms(hold.ttl))
                )
        except (RedisError, OSError, TimeoutError) as exc:
            now = _concurrency.monotonic()
            if now >= hold.deadline:
                self._mark_lost(hold)
                return None
            _concurrency.log.info(
                "seawall: renewing semaphore %r failed, retrying: %r", self.name, exc
            )
            return _lease.retry_at(now, hold.ttl, hold.deadline)
        if hold.released:
            return None
        if not int(extended):
            self._mark_lost(hold)
            return None
        hold.deadline = _lease.lease_deadline(sent, hold.ttl)
        return _lease.renew_at(sent, hold.ttl)

    def _mark_lost(self, hold: _Hold, *, notify: bool = True) -> None:
        if hold.lost or hold.released:
            return
        hold.lost = True
        _concurrency.log.warning(
            "seawall: semaphore %r lost the lease of its permit (fence %d); another process "
            "may hold that permit now",
            self.name,
            hold.fence,
        )
        if notify and self._on_lost is not None:
            async_fire(self._on_lost, self)

    def _not_owned(self, hold: _Hold, action: str) -> LockNotOwnedError:
        return LockNotOwnedError(
            f"cannot {action} semaphore {self.name!r}: the lease of this permit (fence "
            f"{hold.fence}) ended, so another process may have taken the permit meanwhile; "
            "guard writes made under it with its fence (seawall.fenced_write), or raise the ttl",
            lock_name=self.name,
        )

    async def __aenter__(self) -> AsyncSemaphore:
        if not await self.acquire():
            raise LockTimeout(
                f"semaphore {self.name!r} gave no permit within {self.timeout} s: all "
                f"{self.value} are held or queued for; raise the timeout or find the holders "
                f"(sorted set {self._keys.key!r})",
                lock_name=self.name,
            )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.release()
