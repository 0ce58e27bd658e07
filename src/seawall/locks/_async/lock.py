"""seawall.aio.Lock: a token lock with fencing, renewal and woken waiters."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from seawall.errors import LockError, LockNotOwnedError, LockTimeout
from seawall.locks import _lease
from seawall.locks._async.holder import AsyncLeaseHolder, Hold, HoldTable, left_until
from seawall.locks._async.waker import AsyncTurn, AsyncWaker, Made
from seawall.locks._lease import ms
from seawall.locks._replication import DEFAULT_REPLICA_TIMEOUT, replica_policy
from seawall.shared import _concurrency, _scripts, _tokens
from seawall.shared._async.scripts import run_script
from seawall.shared._keys import WAKE_PREFIX, lock_keys_of, tagged
from seawall.shared._validate import (
    check_acquire_wait,
    check_async_client,
    check_name,
    check_seconds,
    check_timeout,
    is_cluster,
)

_ACQUIRE = _scripts.with_prelude("fence_counter", _scripts.load("seawall.locks", "lock_acquire"))
_RELEASE = _scripts.with_prelude("fence_counter", _scripts.load("seawall.locks", "lock_release"))
_EXTEND = _scripts.load("seawall.locks", "lock_extend")


# An unused queue of waiting processes expires after this long (waiters refresh it on
# every attempt, at least every _lease.MAX_WAIT_SLICE).
QUEUE_TTL_MS = 5_000


# Release script arguments: starving threshold, hand-off reservation, wake-up throttle (ms).
_CONTENTION = (ms(_lease.STARVING), ms(_lease.HANDOFF), ms(_lease.WAKE_THROTTLE))


class _Waiting:
    """What a blocking acquire notes of its tries while it waits for its turn's end."""

    __slots__ = ("acquired", "id", "place", "registered", "sent")

    def __init__(self) -> None:
        self.sent = 0.0  # when its first try that registered it was sent (monotonic)
        self.place = ""  # its process's place in the lock's queue, kept across tries
        # Whether a try registered it to be granted the lock, under which waiter id.
        self.registered = False
        self.id = ""
        self.acquired = False


class AsyncLock(AsyncLeaseHolder):
    """A lock on one Redis (or one Cluster slot) shared by many processes.

    Acquire is one script (SET NX PX plus an INCR of the fence counter). The lease is
    renewed at ttl/3 while held; release and extend act only for the owner's token.
    With `replicas=N` an acquisition also waits for N replicas to acknowledge it.

    One object may be shared by the threads (asyncio tasks) of a process like a
    threading.Lock: each owner's hold, fence, release and extend are its own, so an owner
    whose lease lapsed cannot release or extend the hold another owner took since.
    """

    _PUBLIC = "seawall.aio.Lock"

    # The key family and the public name, so seawall.RLock can share this machinery.
    _KIND = "lock"
    _WHAT = "Lock"

    def __init__(
        self,
        client: Any,
        name: str,
        ttl: float = 30.0,
        *,
        timeout: float | None = None,
        renew: bool = True,
        on_lost: Callable[[AsyncLock], Any] | None = None,
        replicas: int = 0,
        replica_timeout: float = DEFAULT_REPLICA_TIMEOUT,
    ) -> None:
        self._client = check_async_client(client, self._WHAT)
        self.name = check_name(name, self._WHAT)
        self.ttl = check_seconds(ttl, f"ttl of lock {name!r}")
        self.timeout = check_timeout(timeout, f"timeout of lock {name!r}")
        if on_lost is not None and not callable(on_lost):
            raise TypeError(f"on_lost of lock {name!r} must be callable, got {on_lost!r}")
        self._renew_leases = bool(renew)
        self._on_lost = on_lost
        self._replication = replica_policy(replicas, replica_timeout, f"lock {name!r}")
        # Whether a release may grant the lock to this object's waiting head outright (see
        # lock_release.lua): not with `replicas=` (a grant is not waited on), nor on
        # Cluster, where a script cannot see whether the waiter's process listens on
        # another node.
        self._grantable = self._replication is None and not is_cluster(self._client)
        self._keys = lock_keys_of(tagged(self._KIND, name))
        self._ttl_ms = ms(self.ttl)
        self._table = HoldTable()
        self._waker: tuple[object, AsyncWaker] | None = None  # (scope, waker) of last use

    def __repr__(self) -> str:
        state = "held" if self._table.count() else "not held"
        return f"<seawall.{self._WHAT} {self.name!r} ttl={self.ttl}s {state}>"

    @property
    def key(self) -> str:
        """The Redis key that holds the owner's token while the lock is held."""
        return self._keys.key

    async def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        """Take the lock; True when taken, False when `timeout` passed (or not blocking).

        `timeout` defaults to the one given to the constructor (None: wait as long as it
        takes). Waiting costs no polling: a release wakes the waiter.
        """
        wait_for = check_acquire_wait(blocking, timeout, self.timeout, self._label)
        me = self._acquiring_owner()
        held = self._table.current(me)
        if held is not None and (held.lost or _concurrency.monotonic() >= held.deadline):
            # Its lease ended (a pause past the ttl, Redis away, the key deleted): nothing
            # of it is left to release, and the caller may take the lock again.
            self._table.take(me)
            held = None
        if held is not None:
            raise LockError(
                f"lock {self.name!r} is already held by this caller; seawall.Lock is not "
                "reentrant: release it first, or use seawall.RLock",
                lock_name=self.name,
            )
        token = _tokens.token_hex()
        if not blocking:
            return await self._attempt(token, me) is None
        deadline = None if wait_for is None else _concurrency.monotonic() + wait_for
        done, claimed, missed = await self._first_try(
            self._keys.key, lambda: self._attempt(token, me, deadline=deadline)
        )
        if done is not None:
            return done
        waiting = _Waiting()
        try:
            async with self._get_waker().turn(self._keys.key, claimed) as turn:
                waiting.acquired = await self._wait(turn, token, me, deadline, missed, waiting)
                return waiting.acquired
        finally:
            if waiting.registered and not waiting.acquired:
                # A release may have granted the lock to this token meanwhile (or may yet,
                # until its registration is dropped): give both back.
                give_back = functools.partial(self._release_token, token, None, waiting.id)
                self._release_later(token, "cleanup", give_back)

    async def _wait(
        self,
        turn: AsyncTurn,
        token: str,
        me: object,
        deadline: float | None,
        missed: Any,
        waiting: _Waiting,
    ) -> bool:
        """The turn's loop of a blocking acquire: tries, queued, and waits for wake-ups."""
        outcome: tuple[int, str] | None
        promoted = not turn.first
        if not await turn.wait_turn(left_until(deadline)):
            return False
        # A head promoted from the local queue may have inherited a wake-up that its
        # predecessor used; like a woken waiter it looks again after the throttle.
        woken = promoted
        if promoted:
            missed = None  # others tried since: look again
        made: Made | None = None  # a try the waker's listener made for this waiter
        grant = (token, functools.partial(self._granted, token, me, waiting))
        while True:
            waiter_id = turn.waiter_id
            if made is not None:
                ok, answer = made
                made = None
                if not ok:
                    if isinstance(answer, TimeoutError):
                        return False  # no reply by the deadline, as below
                    raise answer
                outcome = answer
            elif missed is not None and waiter_id is None:
                # The claim's try was this turn's first try (unqueued, as it would be
                # here): go on from its answer.
                outcome, missed = missed, None
            else:
                missed = None
                if turn.rearm():
                    # Woken after the last wait ran out (or while it was ending): this
                    # try answers that wake-up, and if it fails the release that woke
                    # us will not wake us again within the throttle: look again after
                    # it. (Missed, a waiter slept its whole slice once the other
                    # processes stopped.)
                    woken = True
                # Noted before the try: if it is cancelled in flight, the queue entry
                # it may have made is still withdrawn when the last local waiter leaves.
                queued = waiter_id is not None and turn.queueing()
                try:
                    outcome = await self._waiting_attempt(
                        waiting, token, me, waiter_id or "", queued, deadline
                    )
                except TimeoutError:  # no reply by the deadline (a frozen server)
                    return False
            if outcome is None:
                if waiter_id is not None:
                    turn.dequeued()
                return True
            holder_pttl, waiting.place = outcome
            remaining = left_until(deadline)
            if remaining is not None and remaining <= 0:
                return False
            pause = _lease.wait_slice(holder_pttl, remaining)
            if waiter_id is None:
                # Listen first, then try again queued: a release between the failed
                # attempt and the queueing would otherwise wake nobody here. No longer
                # than the holder's lease: a dead holder's lock is free when it ends,
                # however slow the subscription is.
                await turn.listen(min(pause, 1.0))
                continue
            if woken:
                # Woken but beaten to it: wake-ups are throttled for a moment, so look
                # again after that moment rather than wait for one.
                pause = min(pause, _lease.WAKE_THROTTLE + 0.001)
            # The try a wake-up calls for, made by the listener that hears it.
            attempt = functools.partial(
                self._queued_attempt, turn, waiting, token, me, waiter_id, deadline
            )
            abandon = functools.partial(self._abandon, token, me)
            woken, made = await turn.wait_or_try(
                pause, attempt, abandon, grant if waiting.registered else None
            )

    async def _waiting_attempt(
        self,
        waiting: _Waiting,
        token: str,
        me: object,
        waiter_id: str,
        queued: bool,
        deadline: float | None,
    ) -> tuple[int, str] | None:
        """A try of a waiting head, noted in `waiting` (whether it registers the head to
        be granted the lock, and when the first such try was sent)."""
        if waiter_id and self._grantable:
            if not waiting.registered:
                waiting.sent = _concurrency.monotonic()
            waiting.registered, waiting.id = True, waiter_id
        return await self._attempt(token, me, waiter_id, waiting.place, queued, deadline)

    def _granted(
        self, token: str, me: object, waiting: _Waiting, fence: int
    ) -> tuple[int, str] | None:
        """A release granted the lock to `token` while it waited (see lock_release.lua):
        hold it, as a try that acquired would (None). Its lease began after the first try
        that registered the waiter was sent (the release read a registration), so it is
        counted from then. Not from the last try: one sent after the grant (by a process
        paused and thawed, its wake-up still unread) would count a lease that began
        before it. If that lease is over already (a pause, or a wait longer than the ttl),
        the waiter tries again instead, and the try finds what is left of it, if anything."""
        if _concurrency.monotonic() >= _lease.lease_deadline(waiting.sent, self.ttl):
            return 0, waiting.place
        self._hold(token, fence, me, waiting.sent)
        return None

    async def _queued_attempt(
        self,
        turn: AsyncTurn,
        waiting: _Waiting,
        token: str,
        me: object,
        waiter_id: str,
        deadline: float | None,
    ) -> tuple[int, str] | None:
        """A queued try of a waiting head, as the loop of `_wait` makes it."""
        queued = turn.queueing()
        return await self._waiting_attempt(waiting, token, me, waiter_id, queued, deadline)

    def _abandon(self, token: str, me: object, made: Made) -> None:
        """A try made for a waiter that gave up meanwhile: give back what it was granted."""
        ok, answer = made
        if not ok or answer is not None:
            return  # not granted (or it failed, and `_try_acquire` cleaned up)
        hold = self._table.current(me)
        if hold is not None and hold.token == token:
            self._table.take(me)
            if self._renew_leases:
                self._get_renewer().discard(hold)
            self._release_later(token, "cleanup")

    async def _attempt(
        self,
        token: str,
        me: object,
        waiter_id: str = "",
        place: str = "",
        queued: bool = False,
        deadline: float | None = None,
    ) -> tuple[int, str] | None:
        """One try; None when acquired, else (the holder's remaining ttl in ms, our place).

        With a `waiter_id`, a failed try also queues this process to be woken. With a
        `deadline`, TimeoutError if no reply came by then.
        """
        keys = self._keys
        script_keys: tuple[str, ...]
        args: tuple[Any, ...]
        if waiter_id or queued:
            script_keys = (
                keys.key,
                keys.fence,
                keys.waiters,
                keys.throttle,
                keys.queued,
                keys.grants,
            )
            args = (
                token,
                self._ttl_ms,
                waiter_id,
                QUEUE_TTL_MS,
                place,
                "1" if queued else "",
                "1" if self._grantable else "",
            )
        else:  # a try that cannot touch the queue (see lock_acquire.lua)
            script_keys, args = (keys.key, keys.fence), (token, self._ttl_ms)
        reply = await self._try_acquire(
            _ACQUIRE, script_keys, args, token, me, self._WHAT.lower(), deadline
        )
        if reply is None:
            return None
        return int(reply[1]), _scripts.reply_text(reply[2])

    async def _release_token(
        self, token: str, lease_left: float | None = None, waiter_id: str = ""
    ) -> int:
        """See AsyncLeaseHolder; `waiter_id`: also drop that process's registration to be
        granted the lock if it names `token` (a waiter giving up: see `acquire`)."""
        keys = self._keys
        args = [token, WAKE_PREFIX, *_CONTENTION, _lease.release_memory_ms(lease_left), waiter_id]
        while not args[-1]:  # trailing "" may be left out (see lock_release.lua)
            args.pop()
        reply = await run_script(
            self._client,
            _RELEASE,
            (
                keys.key,
                keys.waiters,
                keys.throttle,
                keys.record(token),
                keys.queued,
                keys.grants,
                keys.fence,
            ),
            args,
        )
        return int(reply)

    async def _extend_token(self, token: str, ttl_ms: int, add: bool = False) -> int:
        args = (token, ttl_ms, "1" if add else "")
        return int(await run_script(self._client, _EXTEND, (self._keys.key,), args))

    async def locked(self) -> bool:
        """Whether anyone holds the lock now."""
        return bool(await self._client.exists(self._keys.key))

    async def _holds(self, hold: Hold) -> bool:
        value = await self._client.get(self._keys.key)
        return value is not None and _scripts.reply_text(value) == hold.token

    def _label(self) -> str:
        return f"{self._KIND} {self.name!r}"

    def _lost_warning(self, hold: Hold) -> str:
        return (
            f"lock {self.name!r} lost its lease (fence {hold.fence}); another process may "
            "hold it now"
        )

    def _not_owned(self, hold: Hold, action: str) -> LockNotOwnedError:
        return LockNotOwnedError(
            f"cannot {action} lock {self.name!r}: its lease (fence {hold.fence}) was lost, so "
            "another process may have held it meanwhile; writes made under this hold must be "
            "guarded by its fence (seawall.fenced_write, or UPDATE ... WHERE fence < :fence)",
            lock_name=self.name,
        )

    def _timed_out(self) -> LockTimeout:
        return LockTimeout(
            f"lock {self.name!r} was not acquired within {self.timeout} s: it is held by "
            "another process; raise the timeout or find the holder (key "
            f"{self._keys.key!r})",
            lock_name=self.name,
        )
