"""seawall.aio.RWLock: many readers or one writer, with writer preference.

Each reader holds its own lease, a member of a zset scored by its expiry in server time
that every script purges, so a live reader never keeps a dead reader's lease alive. A
waiting writer records an intent (also scored by expiry) that holds new readers back; a
writer that dies while waiting stops blocking them when its intent lapses. When a writer
releases, the readers that were waiting are let in ahead of the next writer, so neither
side starves. Waiters are woken through the same per-process waker as seawall.Lock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from seawall.errors import LockError, LockNotOwnedError, LockTimeout
from seawall.locks import _lease, _rwpolicy
from seawall.locks._async.holder import AsyncLeaseHolder, Hold, HoldTable, left_until
from seawall.locks._async.waker import AsyncWaker
from seawall.locks._lease import ms
from seawall.locks._replication import DEFAULT_REPLICA_TIMEOUT, replica_policy
from seawall.shared import _concurrency, _scripts, _tokens
from seawall.shared._async.scripts import run_script
from seawall.shared._keys import WAKE_PREFIX, RWLockKeys, rwlock_keys
from seawall.shared._validate import (
    check_acquire_wait,
    check_async_client,
    check_name,
    check_seconds,
    check_timeout,
)

_READ_ACQUIRE = _scripts.load("seawall.locks", "rwlock_read_acquire")
_WRITE_ACQUIRE = _scripts.with_prelude(
    "fence_counter", _scripts.load("seawall.locks", "rwlock_write_acquire")
)
_READ_RELEASE = _scripts.load("seawall.locks", "rwlock_read_release")
_WRITE_RELEASE = _scripts.load("seawall.locks", "rwlock_write_release")
_READ_EXTEND = _scripts.load("seawall.locks", "rwlock_read_extend")
_WRITE_EXTEND = _scripts.load(
    "seawall.locks", "lock_extend"
)  # a string key holding the token, as for Lock


class AsyncRWLock:
    """A reader-writer lock shared by many processes: `rw.read()` and `rw.write()`.

    Each call returns a new lock-like object (acquire/release/extend/owned/fence, `async
    with`). A side object may be shared by threads or tasks like a threading.Lock: each
    owner's hold, fence, release and extend are its own. With `replicas=N` a hold of either
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


class AsyncRWSide(AsyncLeaseHolder):
    """What the read and write sides share: waiting, renewal, release, errors."""

    _PUBLIC = "seawall.aio.RWLock"

    _kind = ""
    _acquire_script = _READ_ACQUIRE

    def __init__(self, rwlock: AsyncRWLock) -> None:
        self.rwlock = rwlock
        self.name = rwlock.name
        self.ttl = rwlock.ttl
        self.timeout = rwlock.timeout
        self._client = rwlock._client
        self._keys = rwlock.keys
        # The RWLock's options, as every hold of either side uses them.
        self._renew_leases = rwlock.renew
        self._on_lost = rwlock.on_lost
        self._replication = rwlock.replication
        self._table = HoldTable()
        self._waker: tuple[object, AsyncWaker] | None = None  # (scope, waker) of last use

    def __repr__(self) -> str:
        state = "held" if self._table.count() else "not held"
        return f"<seawall.RWLock {self.name!r} {self._kind} side ttl={self.ttl}s {state}>"

    @property
    def _turn_key(self) -> str:
        raise NotImplementedError

    def _intent_ms(self) -> int:
        raise NotImplementedError

    def _pause(self, blocker_pttl_ms: int, remaining: float | None) -> float:
        raise NotImplementedError

    async def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        """Take this side; True when taken, False when `timeout` passed (or not blocking).

        `timeout` defaults to the RWLock's (None: wait as long as it takes). A release
        that may let this side in wakes the waiter; every sleep is bounded besides.
        """
        wait_for = check_acquire_wait(blocking, timeout, self.timeout, self._label)
        me = self._acquiring_owner()
        if self._table.current(me) is not None:
            raise LockError(
                f"the {self._kind} side of rwlock {self.name!r} is already held through this "
                f"object; call rw.{self._kind}() again for another hold, or release it first",
                lock_name=self.name,
            )
        token = _tokens.token_hex()
        if not blocking:
            return await self._attempt(token, me) is None
        deadline = None if wait_for is None else _concurrency.monotonic() + wait_for
        done, claimed, missed = await self._first_try(
            self._turn_key, lambda: self._attempt(token, me, deadline=deadline)
        )
        if done is not None:
            return done
        blocker_pttl: int | None
        async with self._get_waker().turn(self._turn_key, claimed) as turn:
            if not await turn.wait_turn(left_until(deadline)):
                return False
            if not turn.first:
                missed = None  # others tried since: look again
            while True:
                waiter_id = turn.waiter_id
                if missed is not None and waiter_id is None:
                    # The claim's try was this turn's first (unqueued) try.
                    blocker_pttl, missed = missed, None
                else:
                    missed = None
                    turn.rearm()
                    # Noted before the try: if it is cancelled in flight, the queue entry it
                    # may have made is still withdrawn when the last local waiter leaves.
                    queued = waiter_id is not None and turn.queueing()
                    try:
                        blocker_pttl = await self._attempt(
                            token, me, waiter_id or "", queued, deadline
                        )
                    except TimeoutError:  # no reply by the deadline (a frozen server)
                        return False
                if blocker_pttl is None:
                    if waiter_id is not None:
                        turn.dequeued()
                    return True
                remaining = left_until(deadline)
                if remaining is not None and remaining <= 0:
                    return False
                pause = self._pause(blocker_pttl, remaining)
                if waiter_id is None:
                    # Listen first, then try again queued: a release between the failed
                    # attempt and the queueing would otherwise wake nobody here. No longer
                    # than the blocker's lease: see Lock.acquire.
                    await turn.listen(min(pause, 1.0))
                    continue
                await turn.wait_signal(pause)

    async def _attempt(
        self,
        token: str,
        me: object,
        waiter_id: str = "",
        queued: bool = False,
        deadline: float | None = None,
    ) -> int | None:
        """One try; None when acquired, else how long (ms) the blocker lasts unless renewed.

        With a `waiter_id`, a failed try also queues this process to be woken. With a
        `deadline`, TimeoutError if no reply came by then.
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
        args: tuple[Any, ...] = (token, ms(self.ttl))
        if waiter_id or queued:  # a try with neither passes no more (see rwlock_*_acquire.lua)
            args += (waiter_id, self._intent_ms(), "1" if queued else "")
        reply = await self._try_acquire(
            self._acquire_script,
            script_keys,
            args,
            token,
            me,
            f"the {self._kind} side of rwlock",
            deadline,
        )
        return None if reply is None else int(reply[1])

    def _label(self) -> str:
        return f"the {self._kind} side of rwlock {self.name!r}"

    def _lost_warning(self, hold: Hold) -> str:
        return (
            f"the {self._kind} side of rwlock {self.name!r} lost its lease; a writer may hold "
            "it now"
        )

    def _not_owned(self, hold: Hold, action: str) -> LockNotOwnedError:
        return LockNotOwnedError(
            f"cannot {action} the {self._kind} side of rwlock {self.name!r}: its lease was "
            "lost, so a writer may have held the lock meanwhile; work done under this hold "
            "must be checked (writes guarded by the write side's fence)",
            lock_name=self.name,
        )

    def _timed_out(self) -> LockTimeout:
        return LockTimeout(
            f"the {self._kind} side of rwlock {self.name!r} was not acquired within "
            f"{self.timeout} s: it is held (or a writer waits); raise the timeout or find "
            f"the holder (keys {self._keys.writer!r}, {self._keys.readers!r})",
            lock_name=self.name,
        )


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

    async def _release_token(self, token: str, lease_left: float | None = None) -> int:
        keys = self._keys
        reply = await run_script(
            self._client,
            _READ_RELEASE,
            (keys.readers, keys.writers_waiting, keys.record(token)),
            (token, WAKE_PREFIX, keys.writer, ms(_lease.RELEASE_MEMORY)),
        )
        return int(reply)

    async def _extend_token(self, token: str, ttl_ms: int, add: bool = False) -> int:
        keys = (self._keys.readers,)
        args = (token, ttl_ms, "", "1" if add else "")
        return int(await run_script(self._client, _READ_EXTEND, keys, args))

    async def _holds(self, hold: Hold) -> bool:
        keys = (self._keys.readers,)
        args = (hold.token, 1, "1", "")
        return bool(int(await run_script(self._client, _READ_EXTEND, keys, args)))


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

    async def _release_token(self, token: str, lease_left: float | None = None) -> int:
        keys = self._keys
        reply = await run_script(
            self._client,
            _WRITE_RELEASE,
            (
                keys.writer,
                keys.writers_waiting,
                keys.readers_waiting,
                keys.admitted,
                keys.record(token),
            ),
            (
                token,
                WAKE_PREFIX,
                keys.read_turn,
                keys.writer,
                ms(_rwpolicy.ADMIT_WINDOW),
                ms(_lease.RELEASE_MEMORY),
            ),
        )
        return int(reply)

    async def _extend_token(self, token: str, ttl_ms: int, add: bool = False) -> int:
        keys = (self._keys.writer,)
        args = (token, ttl_ms, "1" if add else "")
        return int(await run_script(self._client, _WRITE_EXTEND, keys, args))

    async def _holds(self, hold: Hold) -> bool:
        value = await self._client.get(self._keys.writer)
        return value is not None and _scripts.reply_text(value) == hold.token
