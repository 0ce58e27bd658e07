"""What seawall's lock family shares: holds per owner, their loss, their lease renewal.

`AsyncHolder` is what every member shares (Redlock included): the holds, kept per owner
(thread or asyncio task) in a `HoldTable` so one object can be shared like a
`threading.Lock`; each owner's fence; marking a hold lost (log and `on_lost`); the
ownership check and `async with`.
`AsyncLeaseHolder` adds what Lock (and RLock), Semaphore and both RWLock sides share: a
hold on one Redis (or one Cluster slot) taken by an acquire script, kept alive by the
shared renewer through an extend script and given back by a release script (release and
extend act on the caller's own newest hold). Redlock renews differently (a validity over
several masters) and keeps its own renewal.

Each primitive keeps explicit what is its own: its scripts (`_release_token`,
`_extend_token`, `_holds`) and its wording (`_label`, `_lost_warning`, `_not_owned`,
`_timed_out`), so errors and logs still name "lock", "semaphore" or "rwlock ... side".
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, Self

from redis.exceptions import RedisError

from seawall.errors import LockError, LockNotOwnedError, LockTimeout
from seawall.locks import _lease
from seawall.locks._async import lock_metrics
from seawall.locks._async.renewer import AsyncRenewer, get_renewer
from seawall.locks._async.replication import run_script_replicated
from seawall.locks._async.waker import AsyncWaker, get_waker
from seawall.locks._holds import Hold as Hold
from seawall.locks._holds import HoldTable as HoldTable
from seawall.locks._holds import async_refuse_running_loop
from seawall.locks._replication import ReplicaPolicy
from seawall.shared import _concurrency, _scripts
from seawall.shared._async.scripts import run_script
from seawall.shared._bounded import async_time_limit, async_until, last_look
from seawall.shared._concurrency import (
    async_background,
    async_fire,
    async_owner,
    async_raise_if_cancelled,
    async_scope,
    async_sleep,
    async_spawn,
)

# A background release of a token that a timed-out try may have been granted retries
# after this long (doubling, at most 1 s) while the server does not answer.
RELEASE_RETRY = 0.05


def left_until(deadline: float | None) -> float | None:
    """Seconds left until `deadline` (never below 0), or None for no deadline."""
    return None if deadline is None else max(deadline - _concurrency.monotonic(), 0.0)


class AsyncHolder:
    """A primitive whose holds are kept per owner (thread or task) of one shared object."""

    name: str
    # The public class ("seawall.aio.Lock"), for errors that point to the other world.
    _PUBLIC: str
    _table: HoldTable
    _on_lost: Callable[[Any], Any] | None
    _renewer: tuple[object, AsyncRenewer] | None = None  # (scope, renewer) of last use

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Each class's own acquire is counted and timed for seawall.metrics.
        acquire = cls.__dict__.get("acquire")
        if acquire is not None and not getattr(acquire, "__seawall_measured__", False):
            cls.acquire = lock_metrics.measured(acquire, lock_metrics.metric_kind(cls))  # type: ignore[method-assign]

    async def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        raise NotImplementedError

    async def release(self) -> None:
        raise NotImplementedError

    async def _holds(self, hold: Hold) -> bool:
        """Whether the server(s) still hold `hold` (asked only while its lease may last)."""
        raise NotImplementedError

    def _lost_warning(self, hold: Hold) -> str:
        """What the log says when `hold` is lost."""
        raise NotImplementedError

    def _timed_out(self) -> LockTimeout:
        """The error of an `async with` whose acquire timed out."""
        raise NotImplementedError

    def _label(self) -> str:
        """What it is, for logs, errors and background task names: "lock 'x'"."""
        raise NotImplementedError

    def _get_renewer(self) -> AsyncRenewer:
        """The renewer of this process (event loop), remembered: a cycle asks twice."""
        here = async_scope()
        cached = self._renewer
        if cached is None or cached[0] is not here:
            cached = self._renewer = (here, get_renewer())
        return cached[1]

    def _acquiring_owner(self) -> object:
        """The caller about to acquire: this asyncio task. (A sync lock refuses a thread
        that runs an event loop: see `_holds.refuse_running_loop`.)"""
        async_refuse_running_loop(self._label(), self.name, self._PUBLIC)
        return async_owner()

    def _current(self, *, adopt: bool = True) -> Hold | None:
        """The caller's (this asyncio task's) newest hold through this object, or None.
        Unless `adopt` is False, a caller holding nothing takes over the holds of finished
        threads or tasks (see HoldTable)."""
        return self._table.current(async_owner(), adopt=adopt)

    @property
    def fence(self) -> int:
        """Fencing token of the caller's current (or last) hold (each primitive says what
        its fence orders). Each thread or task sharing the object reads its own hold's."""
        fence = self._table.fence(async_owner())
        if fence is None:
            raise LockError(
                f"{self._label()} has no fence yet for the current asyncio task: acquire it "
                "first (each thread or task sharing the object has its own holds and fences)",
                lock_name=self.name,
            )
        return fence

    async def owned(self) -> bool:
        """Whether the caller (this asyncio task) holds it now, checked on the server."""
        hold = self._current()
        if hold is None or hold.lost or _concurrency.monotonic() >= hold.deadline:
            return False
        return await self._holds(hold)

    def _not_held(self, action: str) -> LockNotOwnedError:
        """The error when the caller has no hold here to `action`."""
        return LockNotOwnedError(
            f"cannot {action} {self._label()}: the current asyncio task does not hold it "
            "through this object (never acquired, already released, or held by another "
            "thread or task: each releases and extends only its own holds)",
            lock_name=self.name,
        )

    def _mark_lost(self, hold: Hold, *, notify: bool = True) -> None:
        if hold.lost or hold.released:
            return
        hold.lost = True
        lock_metrics.lease_lost(type(self))
        _concurrency.log.warning("%s", self._lost_warning(hold))
        if notify and self._on_lost is not None:
            async_fire(self._on_lost, self)

    async def __aenter__(self) -> Self:
        if not await self.acquire():
            raise self._timed_out()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.release()


class AsyncLeaseHolder(AsyncHolder):
    """A hold on one Redis whose lease the shared renewer renews at ttl/3 while held."""

    ttl: float
    _client: Any
    _renew_leases: bool
    _replication: ReplicaPolicy | None
    _waker: tuple[object, AsyncWaker] | None  # (scope, waker) of last use

    async def _release_token(self, token: str, lease_left: float | None = None) -> int:
        """Give back `token`'s hold (waking whoever that lets in); 0 if it was not held.
        `lease_left`: what the caller knows is left of the lease, in seconds (None: not
        known), for primitives whose memory of releases lives as long as the lease."""
        raise NotImplementedError

    async def _extend_token(self, token: str, ttl_ms: int, add: bool = False) -> int:
        """Set the lease of `token`'s hold to `ttl_ms` (with `add`: to what is left of it
        plus `ttl_ms`, reckoned on the server); the new lease in ms, 0 when it is not the
        holder any more."""
        raise NotImplementedError

    def _not_owned(self, hold: Hold, action: str) -> LockNotOwnedError:
        """The error when `action` finds that `hold`'s lease was lost."""
        raise NotImplementedError

    def _get_waker(self) -> AsyncWaker:
        here = async_scope()
        cached = self._waker
        if cached is None or cached[0] is not here:
            cached = self._waker = (here, get_waker(self._client))
        return cached[1]

    async def _first_try(
        self, key: str, attempt: Callable[[], Any]
    ) -> tuple[bool | None, Any, Any]:
        """The first try of a blocking acquire, made before a turn when nobody here waits
        for `key` (most acquisitions find it free and end here): `attempt()` answers None
        when it acquired, else what the turn's loop goes on from.

        Returns (done, claimed, missed): `done` True or False is the acquire's answer
        (acquired; no reply by the deadline); None means go on to a turn, with `claimed`
        (the claim on the local queue, or None: no try was made) and `missed` (the failed
        try's answer, for the turn's first try)."""
        waker = self._get_waker()
        claimed = waker.claim(key)
        if claimed is None:
            return None, None, None
        try:
            missed = await attempt()
        except TimeoutError:  # no reply by the deadline (a frozen server)
            waker.unclaim(key, claimed)
            return False, None, None
        except BaseException:
            waker.unclaim(key, claimed)
            raise
        if missed is None:
            waker.unclaim(key, claimed)
            return True, None, None
        return None, claimed, missed

    async def _try_acquire(
        self,
        script: _scripts.LuaScript,
        keys: Sequence[str],
        args: Sequence[Any],
        token: str,
        me: object,
        replicated_what: str,
        deadline: float | None = None,
    ) -> Any:
        """Run the acquire `script` once: None when it granted `token` (now held and
        renewed), else its reply. `replicated_what` names the hold in a replicas error.

        With a `deadline` (monotonic) the try ends by then (or LAST_LOOK from now, so a
        try at the deadline, as `timeout=0` makes, can still answer), whatever the
        client's socket timeout: TimeoutError when no reply came in time."""
        policy = self._replication
        sent = _concurrency.monotonic()
        acked = 0
        try:
            async with async_until(last_look(deadline)):
                if policy is None:
                    reply = await run_script(self._client, script, keys, args)
                else:
                    reply, acked = await run_script_replicated(
                        self._client, script, keys, args, policy
                    )
            # redis-py's asyncio client may swallow a cancellation that arrives while it
            # reads a reply: a cancelled waiter must still stop (and give back what the
            # try may have been granted, below) instead of trying again for ever.
            async_raise_if_cancelled()
        except BaseException:
            # Cancelled, timed out or failed mid-flight: the server may have granted it
            # (or may yet: a frozen server runs the script when it thaws). Give that token
            # back (a no-op if it was not granted), so nothing outlives a caller that gave
            # up, and never start renewing it.
            self._release_later(token, "cleanup")
            raise
        if int(reply[0]) != 1:
            return reply
        if policy is not None and not policy.enough(acked):
            # Granted, but a failover now could lose it: give it back with the usual
            # release (which wakes whoever it lets in) rather than hold something the
            # promoted replica may not know about.
            try:
                await self._release_token(token)
            except BaseException:
                async_background(
                    functools.partial(self._release_token, token), f"release of {self._label()}"
                )
                raise
            raise policy.error(replicated_what, self.name, acked)
        # A third element: the key already held this token (a replay, or a grant made
        # while the caller waited), with that much of its lease left.
        left = int(reply[2]) / 1000 if len(reply) > 2 and int(reply[2]) >= 0 else None
        lease = self.ttl if left is None else min(left, self.ttl)
        if _concurrency.monotonic() >= _lease.lease_deadline(sent, lease):
            # Granted, but this process was paused past the lease before it read the
            # reply: the hold may be someone else's now. Answer as a try that found the
            # lock taken ("look again now"); the caller's next try, with the same token,
            # finds what is left of it, if anything (a stale token expires by itself).
            return [0, 0, ""]
        self._hold(token, int(reply[1]), me, sent, left)
        return None

    def _hold(
        self, token: str, fence: int, me: object, sent: float, left: float | None = None
    ) -> None:
        """Note a hold granted by a command sent at `sent` (monotonic), and renew it.
        `left`: what was left of its lease when the server answered, if less than the
        ttl (the hold is then renewed at once)."""
        lease = self.ttl if left is None else min(left, self.ttl)
        hold = Hold(token, fence, me, self.ttl, _lease.lease_deadline(sent, lease))
        self._table.add(hold)
        if self._renew_leases:
            renew = _lease.renew_at(sent, self.ttl) if lease == self.ttl else sent
            self._get_renewer().add(self, hold, renew)

    async def release(self) -> None:
        """Give back the caller's newest hold; LockNotOwnedError if the caller holds none
        here, or if its lease was lost (another holder may have come and gone)."""
        # Bookkeeping first, with no await before it: renewal must stop even if this
        # release is cancelled, and another acquire by the caller may follow.
        hold = self._table.take(async_owner())
        if hold is None:
            raise self._not_held("release")
        await self._give_back(hold)

    async def extend(
        self,
        legacy_ttl: float | None = None,
        /,
        *,
        ttl: float | None = None,
        additional: float | None = None,
    ) -> None:
        """Lengthen the lease of the caller's newest hold: `ttl=t` sets it to t seconds
        from now (no argument: to its ttl), `additional=t` adds t seconds to what is left
        of it (reckoned atomically on the server, as redis-py's `extend(t)` does).
        LockNotOwnedError if the caller holds none or its lease was lost.

        The renewal then keeps the lease at its new length. A positional `extend(t)` sets,
        as `ttl=t` does, with a DeprecationWarning: ported from redis-py, it meant to add.
        """
        seconds, add = _lease.extend_request(legacy_ttl, ttl, additional, self._label())
        hold = self._current()
        if hold is None:
            raise self._not_held("extend")
        await self._extend_hold(hold, hold.ttl if seconds is None else seconds, add)

    def _release_later(
        self, token: str, what: str, release_token: Callable[[], Any] | None = None
    ) -> None:
        """Release `token` in the background (never in the caller's time: its server may
        be frozen), trying for at most the ttl: by then its lease has run out anyway.
        `release_token`: the call that releases it, if not `_release_token(token)`."""
        call = release_token or functools.partial(self._release_token, token)

        async def release() -> None:
            give_up = _concurrency.monotonic() + self.ttl
            pause = RELEASE_RETRY
            while True:
                try:
                    async with async_until(give_up):
                        await call()
                    return
                except Exception:
                    # A release is idempotent: try again until the lease is over. A sync
                    # client may refuse at once while an earlier request to a frozen server
                    # is unanswered (TimeoutError); a restarting server refuses connections;
                    # redis-py may fail a call on a connection that a cancelled request
                    # left half closed (an AttributeError from inside the client).
                    if _concurrency.monotonic() + pause >= give_up:
                        raise
                await async_sleep(pause)
                pause = min(pause * 2, 1.0)

        async_spawn(release, f"{what} of {self._label()}", cleanup=True)

    async def _give_back(self, hold: Hold) -> None:
        """Release `hold`, which the caller has just marked released with no await before
        (so renewal stops even if this release is cancelled)."""
        if self._renew_leases:
            self._get_renewer().discard(hold)
        try:
            lease_left = hold.deadline - _concurrency.monotonic()
            released = await self._release_token(hold.token, lease_left)
        except BaseException:
            async_background(
                functools.partial(self._release_token, hold.token),
                f"release of {self._label()}",
            )
            raise
        if not released:
            raise self._not_owned(hold, "release")

    async def _extend_hold(self, hold: Hold, seconds: float, add: bool = False) -> None:
        """Set `hold`'s lease to `seconds` from now (with `add`: to what is left of it plus
        `seconds`), or mark it lost and raise."""
        sent = _concurrency.monotonic()
        new_ms = await self._extend_token(hold.token, _lease.ms(seconds), add)
        if not new_ms:
            self._mark_lost(hold, notify=False)
            raise self._not_owned(hold, "extend")
        new_ttl = new_ms / 1000 if add else seconds
        hold.ttl = new_ttl
        hold.deadline = _lease.lease_deadline(sent, new_ttl)
        if self._renew_leases:
            self._get_renewer().reschedule(hold, _lease.renew_at(sent, new_ttl))

    async def _renew(self, hold: object) -> float | None:
        """Called by the renewer: extend the lease; return when to renew next, or None."""
        assert isinstance(hold, Hold)
        if hold.released or hold.lost:
            return None
        sent = _concurrency.monotonic()
        if sent >= hold.deadline:
            self._mark_lost(hold)
            return None
        try:
            async with async_time_limit(hold.deadline - sent):
                extended = await self._extend_token(hold.token, _lease.ms(hold.ttl))
        except (RedisError, OSError, TimeoutError) as exc:
            now = _concurrency.monotonic()
            if now >= hold.deadline:
                self._mark_lost(hold)
                return None
            _concurrency.log.info("renewing %s failed, retrying: %r", self._label(), exc)
            return _lease.retry_at(now, hold.ttl, hold.deadline)
        if hold.released:
            return None
        if not extended:
            self._mark_lost(hold)
            return None
        hold.deadline = _lease.lease_deadline(sent, hold.ttl)
        return _lease.renew_at(sent, hold.ttl)
