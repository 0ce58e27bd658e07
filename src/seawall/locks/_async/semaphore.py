"""seawall.aio.Semaphore: at most `value` holders, each with its own lease; fair waiting."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from seawall.errors import LockNotOwnedError, LockTimeout
from seawall.locks import _lease
from seawall.locks._async.holder import AsyncLeaseHolder, Hold, HoldTable, left_until
from seawall.locks._async.lock import QUEUE_TTL_MS
from seawall.locks._async.waker import AsyncWaker
from seawall.locks._lease import ms
from seawall.locks._replication import DEFAULT_REPLICA_TIMEOUT, replica_policy
from seawall.shared import _concurrency, _scripts, _tokens
from seawall.shared._async.scripts import run_script
from seawall.shared._keys import WAKE_PREFIX, semaphore_keys
from seawall.shared._validate import (
    check_acquire_wait,
    check_async_client,
    check_name,
    check_permits,
    check_seconds,
    check_timeout,
)

_ACQUIRE = _scripts.with_prelude(
    "fence_counter", _scripts.load("seawall.locks", "semaphore_acquire")
)
_RELEASE = _scripts.load("seawall.locks", "semaphore_release")
_EXTEND = _scripts.load("seawall.locks", "semaphore_extend")
_STATE = _scripts.load("seawall.locks", "semaphore_state")

# A queued process tries again at least this often, which keeps its place in the queue;
# one that has not tried for WAITER_LAPSE (killed, paused) is dropped from the queue, so a
# dead waiter holds up the processes behind it for at most that long.
WAITER_SLICE = 0.4
WAITER_LAPSE_MS = 1_500


class AsyncSemaphore(AsyncLeaseHolder):
    """A counting semaphore shared by many processes: at most `value` permits are held.

    One object may be shared by the threads (asyncio tasks) of a process like a
    threading.Semaphore: each acquire takes a permit for the calling thread or task (one
    caller may hold several), and release and extend act on the caller's newest permit
    only, so a thread cannot give back a permit another thread holds. Each holder's
    lease is its own, timed by the server's clock and renewed at ttl/3 while held; a
    holder that dies gives its permit back when its lease ends. Waiting processes are
    served in arrival order: a newcomer never takes a permit a queued process waits for.
    With `replicas=N` a permit counts only once N replicas acknowledged it.
    """

    _PUBLIC = "seawall.aio.Semaphore"

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
        self._ttl_ms = ms(self.ttl)
        self._table = HoldTable()
        self._waker: tuple[object, AsyncWaker] | None = None  # (scope, waker) of last use

    def __repr__(self) -> str:
        held = self._table.count()
        return (
            f"<seawall.Semaphore {self.name!r} value={self.value} ttl={self.ttl}s "
            f"holding {held} permit{'' if held == 1 else 's'}>"
        )

    @property
    def key(self) -> str:
        """The Redis key (a sorted set) of the holders' tokens, scored by lease end."""
        return self._keys.key

    async def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        """Take a permit; True when taken, False when `timeout` passed (or not blocking).

        `timeout` defaults to the one given to the constructor (None: wait as long as it
        takes). Waiting costs no polling: a release wakes the oldest waiters.
        """
        wait_for = check_acquire_wait(blocking, timeout, self.timeout, self._label)
        me = self._acquiring_owner()
        token = _tokens.token_hex()
        if not blocking:
            return await self._attempt(token, me) is None
        return await self._wait(token, me, wait_for)

    async def _wait(self, token: str, me: object, wait_for: float | None) -> bool:
        deadline = None if wait_for is None else _concurrency.monotonic() + wait_for
        done, claimed, missed = await self._first_try(
            self._keys.key, lambda: self._attempt(token, me, deadline=deadline)
        )
        if done is not None:
            return done
        outcome: tuple[int, str] | None
        async with self._get_waker().turn(self._keys.key, claimed) as turn:
            if not await turn.wait_turn(left_until(deadline)):
                return False
            if not turn.first:
                missed = None  # others tried since: look again
            place = ""  # this process's place in the queue, kept across tries
            while True:
                waiter_id = turn.waiter_id
                if missed is not None and waiter_id is None:
                    # The claim's try was this turn's first (unqueued) try.
                    outcome, missed = missed, None
                else:
                    missed = None
                    turn.rearm()
                    if waiter_id is not None:
                        turn.queueing()
                    try:
                        outcome = await self._attempt(token, me, waiter_id or "", place, deadline)
                    except TimeoutError:  # no reply by the deadline (a frozen server)
                        return False
                if outcome is None:
                    if waiter_id is not None:
                        turn.dequeued()
                    return True
                wait_ms, place = outcome
                remaining = left_until(deadline)
                if remaining is not None and remaining <= 0:
                    return False
                # Look again when a lease or a queued process may lapse, and at least every
                # WAITER_SLICE, which also keeps this process's place in the queue.
                pause = min(_lease.wait_slice(wait_ms, remaining), WAITER_SLICE)
                if waiter_id is None:
                    # Listen first, then try again queued: a release between the failed
                    # attempt and the queueing would otherwise wake nobody here. No longer
                    # than a lease may take to lapse: see Lock.acquire.
                    await turn.listen(min(pause, 1.0))
                    continue
                await turn.wait_signal(pause)

    async def _attempt(
        self,
        token: str,
        me: object,
        waiter_id: str = "",
        place: str = "",
        deadline: float | None = None,
    ) -> tuple[int, str] | None:
        """One try; None when acquired, else (ms until something lapses, our place).
        With a `deadline`, TimeoutError if no reply came by then."""
        keys = self._keys
        script_keys = (keys.key, keys.fence, keys.waiters, keys.seen)
        args: tuple[Any, ...] = (token, self.value, self._ttl_ms)
        if waiter_id:  # a try without one passes no more (see semaphore_acquire.lua)
            args += (waiter_id, WAITER_LAPSE_MS, QUEUE_TTL_MS, place)
        reply = await self._try_acquire(
            _ACQUIRE, script_keys, args, token, me, "a permit of semaphore", deadline
        )
        if reply is None:
            return None
        return int(reply[1]), _scripts.reply_text(reply[2])

    async def _release_token(self, token: str, lease_left: float | None = None) -> int:
        keys = self._keys
        reply = await run_script(
            self._client,
            _RELEASE,
            (*keys.queue, keys.record(token)),
            (token, self.value, WAKE_PREFIX, ms(_lease.RELEASE_MEMORY)),
        )
        return int(reply)

    async def _extend_token(self, token: str, ttl_ms: int, add: bool = False) -> int:
        args = (token, ttl_ms, "1" if add else "")
        return int(await run_script(self._client, _EXTEND, (self._keys.key,), args))

    async def _holds(self, hold: Hold) -> bool:
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

    def _label(self) -> str:
        return f"semaphore {self.name!r}"

    def _lost_warning(self, hold: Hold) -> str:
        return (
            f"semaphore {self.name!r} lost the lease of its permit (fence {hold.fence}); "
            "another process may hold that permit now"
        )

    def _not_owned(self, hold: Hold, action: str) -> LockNotOwnedError:
        return LockNotOwnedError(
            f"cannot {action} semaphore {self.name!r}: the lease of this permit (fence "
            f"{hold.fence}) ended, so another process may have taken the permit meanwhile; "
            "guard writes made under it with its fence (seawall.fenced_write), or raise the ttl",
            lock_name=self.name,
        )

    def _timed_out(self) -> LockTimeout:
        return LockTimeout(
            f"semaphore {self.name!r} gave no permit within {self.timeout} s: all "
            f"{self.value} are held or queued for; raise the timeout or find the holders "
            f"(sorted set {self._keys.key!r})",
            lock_name=self.name,
        )
