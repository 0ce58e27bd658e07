"""seawall.aio.RWLock: many readers or one writer, with writer preference.

Each reader holds its own lease, a member of a zset scored by its expiry in server time
that every script purges, so a live reader never keeps a dead reader's lease alive. A
waiting writer records an intent (also scored by expiry) that holds new readers back; a
writer that dies while waiting stops blocking them when its intent lapses. When a writer
releases, the readers that were waiting are let in ahead of the next writer, so neither
side starves. Waiters are woken through the same per-process waker as seawall.Lock.
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Callable
from types import TracebackType
from typing import Any

from redis.exceptions import RedisError

from seawall import _concurrency, _lease, _rwpolicy, _scripts
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
from seawall._keys import WAKE_PREFIX, RWLockKeys, rwlock_keys
from seawall._replication import DEFAULT_REPLICA_TIMEOUT, replica_policy
from seawall._rwpolicy import ms
from seawall._validate import check_async_client, check_name, check_seconds, check_timeout
from seawall.errors import LockError, LockNotOwnedError, LockTimeout

_READ_ACQUIRE = _scripts.load("rwlock_read_acquire")
_WRITE_ACQUIRE = _scripts.load("rwlock_write_acquire")
_READ_RELEASE = _scripts.load("rwlock_read_release")
_WRITE_RELEASE = _scripts.load("rwlock_write_release")
_READ_EXTEND = _scripts.load("rwlock_read_extend")
_WRITE_EXTEND = _scripts.load("lock_extend")  # a string key holding the token, as for Lock


class _Hold:
    """One acquisition of one side: its token, fence and lease bookkeeping."""

    __slots__ = ("deadline", "fence", "lost", "owner", "released", "token", "ttl")

    def __init__(self, token: str, fence: int, owner: object, ttl: float, deadline: float) -> None:
        self.token = token
        self.fence = fence
        self.owner = owner
        self.ttl = ttl
        self.deadline = deadline  # monotonic time by which the lease has surely lapsed
        self.lost = False
        self.released = False


class AsyncRWLock:
    """A reader-writer lock shared by many processes: `rw.read()` and `rw.write()`.

    Each call returns a new lock-like object (acquire/release/extend/owned/fence, `async
    with`), so every thread or task takes its own hold. With `replicas=N` a hold of either
    side counts only once N replicas acknowledged it.
    """

    def __init__(
        self,
        client: Any,
        name: str,
        ttl: float = 30.0,
        *,
        timeout: float | None = None,
        renew: bool = True,
        on_lost: Callable[[AsyncRWSide], Any] | None = None,
        replicas: int = 0,
        replica_timeout: float = DEFAULT_REPLICA_TIMEOUT,
    ) -> None:
        self._client = check_async_client(client, "RWLock")
        self.name = check_name(name, "RWLock")
        self.ttl = check_seconds(ttl, f"ttl of rwlock {name!r}")
        self.timeout = check_timeout(timeout, f"timeout of rwlock {name!r}")
        if on_lost is not None and not callable(on_lost):
            raise TypeError(f"on_lost of rwlock {name!r} must be callable, got {on_lost!r}")
        self.renew = bool(renew)
        self.on_lost = on_lost
        self.replication = replica_policy(replicas, replica_timeout, f"rwlock {name!r}")
        self.keys: RWLockKeys = rwlock_keys(name)

    def __repr__(self) -> str:
        return f"<seawall.RWLock {self.name!r} ttl={self.ttl}s>"

    def read(self) -> AsyncReadLock:
        """A new shared (read) side: any number of readers hold it at once."""
        return AsyncReadLock(self)

    def write(self) -> AsyncWriteLock:
        """A new exclusive (write) side: one writer, and no reader meanwhile."""
        return AsyncWriteLock(self)


class AsyncRWSide:
    """What the read and write sides share: waiting, renewal, release, errors."""

    _kind = ""
    _acquire_script = _READ_ACQUIRE

    def __init__(self, rwlock: AsyncRWLock) -> None:
        self.rwlock = rwlock
        self.name = rwlock.name
        self.ttl = rwlock.ttl
        self.timeout = rwlock.timeout
        self._client = rwlock._client
        self._keys = rwlock.keys
        self._hold: _Hold | None = None
        self._last_fence: int | None = None
        self._waker: tuple[object, AsyncWaker] | None = None  # (scope, waker) of last use

    def __repr__(self) -> str:
        state = "held" if self._hold is not None else "not held"
        return f"<seawall.RWLock {self.name!r} {self._kind} side ttl={self.ttl}s {state}>"

    @property
    def _turn_key(self) -> str:
        raise NotImplementedError

    def _intent_ms(self) -> int:
        raise NotImplementedError

    def _pause(self, blocker_pttl_ms: int, remaining: float | None) -> float:
        raise NotImplementedError

    async def _release_token(self, token: str) -> int:
        raise NotImplementedError

    async def _extend_token(self, token: str, ttl_ms: int) -> int:
        raise NotImplementedError

    @property
    def fence(self) -> int:
        """Fence of the current (or last) hold; see the read and write sides."""
        if self._last_fence is None:
            raise LockError(
                f"{self._kind} side of rwlock {self.name!r} has no fence yet: acquire it first",
                lock_name=self.name,
            )
        return self._last_fence

    async def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        """Take this side; True when taken, False when `timeout` passed (or not blocking).

        `timeout` defaults to the RWLock's (None: wait as long as it takes). A release
        that may let this side in wakes the waiter; every sleep is bounded besides.
        """
        wait_for = (
            self.timeout
            if timeout is None
            else check_timeout(timeout, f"timeout of rwlock {self.name!r}")
        )
        me = async_owner()
        held = self._hold
        if held is not None and held.owner is me and not held.released:
            raise LockError(
                f"the {self._kind} side of rwlock {self.name!r} is already held through this "
                f"object; call rw.{self._kind}() again for another hold, or release it first",
                lock_name=self.name,
            )
        token = secrets.token_hex(16)
        if not blocking:
            return await self._attempt(token, me) is None
        deadline = None if wait_for is None else _concurrency.monotonic() + wait_for
        async with self._get_waker().turn(self._turn_key) as turn:
            if not await turn.wait_turn(_remaining(deadline)):
                return False
            while True:
                waiter_id = turn.waiter_id
                turn.rearm()
                # Noted before the try: if it is cancelled in flight, the queue entry it may
                # have made is still withdrawn when the last local waiter leaves.
                queued = waiter_id is not None and turn.queueing()
                blocker_pttl = await self._attempt(token, me, waiter_id or "", queued)
                if blocker_pttl is None:
                    if waiter_id is not None:
                        turn.dequeued()
                    return True
                remaining = _remaining(deadline)
                if remaining is not None and remaining <= 0:
                    return False
                if waiter_id is None:
                    # Listen first, then try again queued: a release between the failed
                    # attempt and the queueing would otherwise wake nobody here.
                    await turn.listen(min(remaining, 1.0) if remaining is not None else 1.0)
                    continue
                await turn.wait_signal(self._pause(blocker_pttl, remaining))

    def _get_waker(self) -> AsyncWaker:
        here = async_scope()
        cached = self._waker
        if cached is None or cached[0] is not here:
            cached = self._waker = (here, get_waker(self._client))
        return cached[1]

    async def _attempt(
        self, token: str, me: object, waiter_id: str = "", queued: bool = False
    ) -> int | None:
        """One try; None when acquired, else how long (ms) the blocker lasts unless renewed.

        With a `waiter_id`, a failed try also queues this process to be woken.
        """
        keys = self._keys
        script_keys = (
            keys.writer,
            keys.readers,
            keys.writers_waiting,
            keys.readers_waiting,
            keys.admitted,
            keys.fence,
        )
        args = (token, ms(self.ttl), waiter_id, self._intent_ms(), "1" if queued else "")
        policy = self.rwlock.replication
        sent = _concurrency.monotonic()
        acked = 0
        try:
            if policy is None:
                reply = await run_script(self._client, self._acquire_script, script_keys, args)
            else:
                reply, acked = await run_script_replicated(
                    self._client, self._acquire_script, script_keys, args, policy
                )
        except BaseException:
            # Cancelled or failed mid-flight: the server may have granted it. Give that
            # token back (a no-op if it was not granted) and never renew it.
            async_background(
                functools.partial(self._release_token, token),
                f"cleanup of rwlock {self.name!r} ({self._kind})",
            )
            raise
        if int(reply[0]) != 1:
            return int(reply[1])
        if policy is not None and not policy.enough(acked):
            # Granted, but a failover now could lose it: give it back with this side's
            # usual release, which wakes whoever it lets in, rather than hold it unreplicated.
            try:
                await self._release_token(token)
            except BaseException:
                async_background(
                    functools.partial(self._release_token, token),
                    f"release of rwlock {self.name!r} ({self._kind})",
                )
                raise
            raise policy.error(f"the {self._kind} side of rwlock", self.name, acked)
        hold = _Hold(token, int(reply[1]), me, self.ttl, _lease.lease_deadline(sent, self.ttl))
        self._hold = hold
        self._last_fence = hold.fence
        if self.rwlock.renew:
            get_renewer().add(self, hold, _lease.renew_at(sent, self.ttl))
        return None

    async def release(self) -> None:
        """Release this hold; LockNotOwnedError if it is not held any more."""
        hold = self._hold
        if hold is None:
            raise LockNotOwnedError(
                f"the {self._kind} side of rwlock {self.name!r} is not held by this object "
                "(never acquired, or already released)",
                lock_name=self.name,
            )
        # Bookkeeping first, with no await before it: renewal must stop even if this
        # release is cancelled.
        hold.released = True
        self._hold = None
        if self.rwlock.renew:
            get_renewer().discard(hold)
        try:
            released = await self._release_token(hold.token)
        except BaseException:
            async_background(
                functools.partial(self._release_token, hold.token),
                f"release of rwlock {self.name!r} ({self._kind})",
            )
            raise
        if not released:
            raise self._not_owned(hold, "release")

    async def extend(self, ttl: float | None = None) -> None:
        """Reset this hold's lease to `ttl` seconds (default: the RWLock's ttl) from now."""
        if ttl is not None:
            ttl = check_seconds(ttl, f"ttl of rwlock {self.name!r}")
        hold = self._hold
        if hold is None:
            raise LockNotOwnedError(
                f"cannot extend the {self._kind} side of rwlock {self.name!r}: this object "
                "does not hold it",
                lock_name=self.name,
            )
        new_ttl = hold.ttl if ttl is None else ttl
        sent = _concurrency.monotonic()
        if not await self._extend_token(hold.token, ms(new_ttl)):
            self._mark_lost(hold, notify=False)
            raise self._not_owned(hold, "extend")
        hold.ttl = new_ttl
        hold.deadline = _lease.lease_deadline(sent, new_ttl)
        if self.rwlock.renew:
            get_renewer().reschedule(hold, _lease.renew_at(sent, new_ttl))

    async def owned(self) -> bool:
        """Whether this object holds its side now (checked on the server)."""
        hold = self._hold
        if hold is None or hold.lost or _concurrency.monotonic() >= hold.deadline:
            return False
        return await self._holds(hold.token)

    async def _holds(self, token: str) -> bool:
        raise NotImplementedError

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
                extended = await self._extend_token(hold.token, ms(hold.ttl))
        except (RedisError, OSError, TimeoutError) as exc:
            now = _concurrency.monotonic()
            if now >= hold.deadline:
                self._mark_lost(hold)
                return None
            _concurrency.log.info(
                "seawall: renewing rwlock %r (%s) failed, retrying: %r", self.name, self._kind, exc
            )
            return _lease.retry_at(now, hold.ttl, hold.deadline)
        if hold.released:
            return None
        if not extended:
            self._mark_lost(hold)
            return None
        hold.deadline = _lease.lease_deadline(sent, hold.ttl)
        return _lease.renew_at(sent, hold.ttl)

    def _mark_lost(self, hold: _Hold, *, notify: bool = True) -> None:
        if hold.lost or hold.released:
            return
        hold.lost = True
        _concurrency.log.warning(
            "seawall: the %s side of rwlock %r lost its lease; a writer may hold it now",
            self._kind,
            self.name,
        )
        on_lost = self.rwlock.on_lost
        if notify and on_lost is not None:
            async_fire(on_lost, self)

    def _not_owned(self, hold: _Hold, action: str) -> LockNotOwnedError:
        return LockNotOwnedError(
            f"cannot {action} the {self._kind} side of rwlock {self.name!r}: its lease was "
            "lost, so a writer may have held the lock meanwhile; work done under this hold "
            "must be checked (writes guarded by the write side's fence)",
            lock_name=self.name,
        )

    async def __aenter__(self) -> AsyncRWSide:
        if not await self.acquire():
            raise LockTimeout(
                f"the {self._kind} side of rwlock {self.name!r} was not acquired within "
                f"{self.timeout} s: it is held (or a writer waits); raise the timeout or find "
                f"the holder (keys {self._keys.writer!r}, {self._keys.readers!r})",
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


class AsyncReadLock(AsyncRWSide):
    """The shared side. `fence` is that of the newest write hold when the read began (0:
    nothing written yet under this lock), so a reader knows which write it saw at least."""

    _kind = "read"
    _acquire_script = _READ_ACQUIRE

    @property
    def _turn_key(self) -> str:
        return self._keys.read_turn

    def _intent_ms(self) -> int:
        return ms(_rwpolicy.READER_QUEUE_TTL)

    def _pause(self, blocker_pttl_ms: int, remaining: float | None) -> float:
        return _rwpolicy.reader_pause(blocker_pttl_ms, remaining)

    async def _release_token(self, token: str) -> int:
        keys = self._keys
        reply = await run_script(
            self._client,
            _READ_RELEASE,
            (keys.readers, keys.writers_waiting),
            (token, WAKE_PREFIX, keys.writer),
        )
        return int(reply)

    async def _extend_token(self, token: str, ttl_ms: int) -> int:
        return int(
            await run_script(self._client, _READ_EXTEND, (self._keys.readers,), (token, ttl_ms, ""))
        )

    async def _holds(self, token: str) -> bool:
        return bool(
            int(
                await run_script(self._client, _READ_EXTEND, (self._keys.readers,), (token, 1, "1"))
            )
        )


class AsyncWriteLock(AsyncRWSide):
    """The exclusive side. `fence` strictly increases with every write hold of the name."""

    _kind = "write"
    _acquire_script = _WRITE_ACQUIRE

    @property
    def _turn_key(self) -> str:
        return self._keys.writer

    def _intent_ms(self) -> int:
        return ms(_rwpolicy.intent_ttl(self.ttl))

    def _pause(self, blocker_pttl_ms: int, remaining: float | None) -> float:
        return _rwpolicy.writer_pause(blocker_pttl_ms, remaining, self.ttl)

    async def _release_token(self, token: str) -> int:
        keys = self._keys
        reply = await run_script(
            self._client,
            _WRITE_RELEASE,
            (keys.writer, keys.writers_waiting, keys.readers_waiting, keys.admitted),
            (token, WAKE_PREFIX, keys.read_turn, keys.writer, ms(_rwpolicy.ADMIT_WINDOW)),
        )
        return int(reply)

    async def _extend_token(self, token: str, ttl_ms: int) -> int:
        return int(
            await run_script(self._client, _WRITE_EXTEND, (self._keys.writer,), (token, ttl_ms))
        )

    async def _holds(self, token: str) -> bool:
        value = await self._client.get(self._keys.writer)
        return value is not None and _scripts.reply_text(value) == token


def _remaining(deadline: float | None) -> float | None:
    return None if deadline is None else max(deadline - _concurrency.monotonic(), 0.0)
