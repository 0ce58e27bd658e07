"""seawall.aio.Redlock: one lock over several independent Redis masters (Redlock).

Each round of requests goes to every master at once, each bounded by a per-node timeout;
the arithmetic (quorum, drift, validity, fences) lives in `seawall.locks._redlock`.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import redis.asyncio.cluster
from redis.exceptions import NoScriptError, ResponseError

from seawall.errors import LockError, LockNotOwnedError, LockTimeout
from seawall.locks import _lease, _redlock
from seawall.locks._async.holder import AsyncHolder, Hold, HoldTable
from seawall.locks._lease import ms
from seawall.shared import _concurrency, _scripts, _tokens
from seawall.shared._concurrency import async_background, async_each_node, async_owner
from seawall.shared._keys import tagged
from seawall.shared._validate import (
    AsyncClient,
    check_acquire_wait,
    check_async_client,
    check_name,
    check_seconds,
    check_timeout,
)

_ACQUIRE = _scripts.load("seawall.locks", "redlock_acquire")
_RAISE_FENCE = _scripts.load("seawall.locks", "redlock_raise_fence")
_RELEASE = _scripts.load("seawall.locks", "redlock_release")
_EXTEND = _scripts.load("seawall.locks", "lock_extend")


class AsyncRedlock(AsyncHolder):
    """A lock held by a majority of independent masters (the Redlock algorithm).

    It stays available while a minority of the masters is down or frozen. Each hold has
    a validity (`validity()`), after which another client may hold the lock, and a fence
    (`fence`) that a guarded resource can use to refuse a holder whose validity ran out.
    One object may be shared by threads or tasks: each owner's hold, fence and validity
    are its own.
    """

    _PUBLIC = "seawall.aio.Redlock"

    def __init__(
        self,
        clients: Iterable[Any],
        name: str,
        ttl: float = 10.0,
        *,
        timeout: float | None = None,
        renew: bool = True,
        on_lost: Callable[[AsyncRedlock], Any] | None = None,
        node_timeout: float | None = None,
        retry_delay: float = _redlock.RETRY_DELAY,
    ) -> None:
        self.name = check_name(name, "Redlock")
        self._clients = _check_masters(clients, name)
        self.ttl = check_seconds(ttl, f"ttl of Redlock {name!r}", minimum=0.01)
        self.node_timeout = (
            _redlock.default_node_timeout(self.ttl)
            if node_timeout is None
            else check_seconds(node_timeout, f"node_timeout of Redlock {name!r}")
        )
        if self.node_timeout >= self.ttl / 2:
            raise ValueError(
                f"node_timeout of Redlock {name!r} ({self.node_timeout:g} s) must be well "
                f"below its ttl ({self.ttl:g} s): a slow master would use up the validity; "
                "lower node_timeout or raise the ttl"
            )
        self.retry_delay = check_seconds(retry_delay, f"retry_delay of Redlock {name!r}")
        self.timeout = check_timeout(timeout, f"timeout of Redlock {name!r}")
        if on_lost is not None and not callable(on_lost):
            raise TypeError(f"on_lost of Redlock {name!r} must be callable, got {on_lost!r}")
        self._renew_leases = bool(renew)
        self._on_lost = on_lost
        self.key = tagged("redlock", name)
        # Same hash tag as the key: both fit in one Cluster slot, as every seawall script's
        # keys do (each master here is still a separate server, never a Cluster).
        self._fence_key = f"{self.key}:fence"
        self._released_key = f"{self.key}:released"  # makes a retried release idempotent
        self._ttl_ms = ms(self.ttl)
        self._quorum = _redlock.quorum(len(self._clients))
        self._table = HoldTable()
        self._floor = 0  # the highest fence counter seen on any master
        self.attempts = 0  # attempts made by the last acquire()

    def __repr__(self) -> str:
        state = "held" if self._table.count() else "not held"
        return (
            f"<seawall.Redlock {self.name!r} over {len(self._clients)} masters "
            f"ttl={self.ttl}s {state}>"
        )

    def validity(self) -> float:
        """Seconds left in which the caller's hold is guaranteed (0.0 when not held or
        lost)."""
        hold = self._current()
        if hold is None or hold.lost:
            return 0.0
        return max(hold.deadline - _concurrency.monotonic(), 0.0)

    async def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        """Take the lock on a majority of masters; False when `timeout` passed (or not
        blocking). Failed attempts are retried after a random delay up to `retry_delay`."""
        wait_for = check_acquire_wait(blocking, timeout, self.timeout, self._label)
        me = self._acquiring_owner()
        held = self._table.current(me)
        if held is not None and (held.lost or _concurrency.monotonic() >= held.deadline):
            self._table.take(me)  # its lease ended: nothing is left to release
            held = None
        if held is not None:
            raise LockError(
                f"Redlock {self.name!r} is already held by this caller; it is not "
                "reentrant: release it first",
                lock_name=self.name,
            )
        deadline = None if wait_for is None else _concurrency.monotonic() + wait_for
        self.attempts = 0
        while True:
            self.attempts += 1
            if await self._attempt(me):
                return True
            if not blocking:
                return False
            pause = _redlock.retry_delay(self.retry_delay)
            if deadline is not None and _concurrency.monotonic() + pause >= deadline:
                return False
            await _concurrency.async_sleep(pause)

    async def _on_all(
        self,
        script: _scripts.LuaScript,
        keys: Sequence[str],
        args: Sequence[Any],
        timeout: float | None = None,
        clients: Sequence[AsyncClient] | None = None,
    ) -> list[Any]:
        """Run `script` on every master at once; each reply, or the exception it raised.

        Like `run_script`, by SHA first, then (only on masters that answered NOSCRIPT,
        after a restart or SCRIPT FLUSH) with its source, in a second round that gets its
        own timeout: the validity counts the time either way.
        """
        targets = self._clients if clients is None else clients
        wait = self.node_timeout if timeout is None else timeout
        replies = await async_each_node(
            targets, ("EVALSHA", script.sha, len(keys), *keys, *args), wait
        )
        missing = [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
        if missing:
            again = await async_each_node(
                [targets[i] for i in missing],
                ("EVAL", script.source, len(keys), *keys, *args),
                wait,
            )
            for index, reply in zip(missing, again, strict=True):
                replies[index] = reply
        return replies

    async def _release_all(self, token: str) -> list[Any]:
        return await self._on_all(_RELEASE, (self.key, self._released_key), (token,))

    async def _attempt(self, me: object) -> bool:
        token = _tokens.token_hex()
        started = _concurrency.monotonic()
        try:
            replies = await self._on_all(
                _ACQUIRE, (self.key, self._fence_key), (token, self._ttl_ms, self._floor)
            )
            counters = [_granted(reply) for reply in replies]
            self._floor = max([self._floor, *(c for c in counters if c is not None)])
            plan = _redlock.plan_fence(counters, len(self._clients))
            granted = len(counters) - counters.count(None)
            if granted >= self._quorum and plan.to_raise:
                granted = plan.at_fence + await self._raise_fence(token, plan)
            tally = _redlock.Tally(
                granted,
                len(self._clients),
                _redlock.validity(self.ttl, started, _concurrency.monotonic()),
            )
            if not tally.success:
                # Every master, not only those that said yes: a master that answered
                # after its timeout may have granted too.
                await self._release_all(token)
        except BaseException:
            # Cancelled or failed mid-flight: masters may hold this token; free them.
            async_background(
                functools.partial(self._release_all, token), f"cleanup of Redlock {self.name!r}"
            )
            raise
        if not tally.success:
            if granted == 0:
                _raise_server_error(replies)
            return False
        hold = Hold(token, plan.fence, me, self.ttl, _redlock.deadline(self.ttl, started))
        self._table.add(hold)
        if self._renew_leases:
            self._get_renewer().add(self, hold, _lease.renew_at(started, self.ttl))
        return True

    async def _raise_fence(self, token: str, plan: _redlock.FencePlan) -> int:
        """Raise lagging granting masters to the fence; how many now hold it."""
        replies = await self._on_all(
            _RAISE_FENCE,
            (self.key, self._fence_key),
            (token, plan.fence),
            clients=[self._clients[i] for i in plan.to_raise],
        )
        return sum(1 for reply in replies if _is_one(reply))

    async def release(self) -> None:
        """Release the caller's hold on every master; LockNotOwnedError if the caller
        holds none here, or if the hold was lost meanwhile."""
        # Bookkeeping first, with no await before it (see AsyncLeaseHolder.release).
        hold = self._table.take(async_owner())
        if hold is None:
            raise self._not_held("release")
        if self._renew_leases:
            self._get_renewer().discard(hold)
        in_time = not hold.lost and _concurrency.monotonic() < hold.deadline
        try:
            replies = await self._release_all(hold.token)
        except BaseException:
            async_background(
                functools.partial(self._release_all, hold.token),
                f"release of Redlock {self.name!r}",
            )
            raise
        refused = sum(1 for reply in replies if isinstance(reply, int) and reply == 0)
        if not in_time or refused > len(self._clients) - self._quorum:
            raise self._not_owned(hold, "release")

    async def extend(
        self,
        legacy_ttl: float | None = None,
        /,
        *,
        ttl: float | None = None,
        additional: float | None = None,
    ) -> None:
        """Lengthen the hold on a majority of masters, within the current validity:
        `ttl=t` sets it to t seconds (no argument: to its ttl), `additional=t` adds t
        seconds to what each master has left of it (the validity then counts from the
        shortest). Otherwise the hold is lost (LockNotOwnedError). A positional
        `extend(t)` sets, as `ttl=t` does, with a DeprecationWarning (redis-py's adds)."""
        seconds, add = _lease.extend_request(legacy_ttl, ttl, additional, self._label())
        if seconds is not None and not add:
            seconds = check_seconds(seconds, f"ttl of Redlock {self.name!r}", minimum=0.01)
        hold = self._current()
        if hold is None:
            raise self._not_held("extend")
        sent = _concurrency.monotonic()
        if not await self._extend_round(hold, hold.ttl if seconds is None else seconds, add):
            self._mark_lost(hold, notify=False)
            raise self._not_owned(hold, "extend")
        if self._renew_leases:
            self._get_renewer().reschedule(hold, _lease.renew_at(sent, hold.ttl))

    async def _extend_round(self, hold: Hold, ttl: float, add: bool = False) -> bool | None:
        """Extend on every master (to `ttl`, or by `ttl` with `add`): True done, False
        refused by a majority, None unsure."""
        started = _concurrency.monotonic()
        left = hold.deadline - started
        if left <= 0:
            return False
        replies = await self._on_all(
            _EXTEND,
            (self.key,),
            (hold.token, ms(ttl), "1" if add else ""),
            min(self.node_timeout, left),
        )
        now = _concurrency.monotonic()
        # Each master answers the lease it set (ms); the shortest bounds the validity.
        leases = [reply for reply in replies if _is_lease(reply)]
        extended = len(leases)
        refused = sum(1 for reply in replies if isinstance(reply, int) and reply == 0)
        if add and leases:
            ttl = min(leases) / 1000
        tally = _redlock.Tally(extended, len(self._clients), _redlock.validity(ttl, started, now))
        if tally.success and now < hold.deadline and not hold.released:
            hold.ttl = ttl
            hold.deadline = _redlock.deadline(ttl, started)
            return True
        return False if refused > len(self._clients) - self._quorum else None

    async def locked(self) -> bool:
        """Whether a majority of the masters hold the key now (anyone's hold)."""
        replies = await async_each_node(self._clients, ("EXISTS", self.key), self.node_timeout)
        return sum(1 for reply in replies if _is_one(reply)) >= self._quorum

    async def owned(self) -> bool:
        """Whether the caller holds the lock now: within its validity, and a majority of
        the masters still have its token."""
        return await super().owned()

    async def _holds(self, hold: Hold) -> bool:
        replies = await async_each_node(self._clients, ("GET", self.key), self.node_timeout)
        mine = sum(
            1
            for reply in replies
            if isinstance(reply, bytes | str) and _scripts.reply_text(reply) == hold.token
        )
        return mine >= self._quorum and _concurrency.monotonic() < hold.deadline

    async def _renew(self, hold: object) -> float | None:
        """Called by the renewer: extend the hold; return when to renew next, or None."""
        assert isinstance(hold, Hold)
        if hold.released or hold.lost:
            return None
        sent = _concurrency.monotonic()
        try:
            done = await self._extend_round(hold, hold.ttl)
        except Exception as exc:  # a bug or odd reply: retry like a failed round
            _concurrency.log.info("renewing Redlock %r failed: %r", self.name, exc)
            done = None
        if hold.released:
            return None
        if done:
            return _lease.renew_at(sent, hold.ttl)
        now = _concurrency.monotonic()
        if done is False or now >= hold.deadline:
            self._mark_lost(hold)
            return None
        return _lease.retry_at(now, hold.ttl, hold.deadline)

    def _label(self) -> str:
        return f"Redlock {self.name!r}"

    def _lost_warning(self, hold: Hold) -> str:
        return (
            f"Redlock {self.name!r} lost its hold (fence {hold.fence}); another process may "
            "hold it now"
        )

    def _not_owned(self, hold: Hold, action: str) -> LockNotOwnedError:
        return LockNotOwnedError(
            f"cannot {action} Redlock {self.name!r}: its validity (fence {hold.fence}) ran "
            "out or a majority of masters no longer hold its token, so another process may "
            "have held it meanwhile; guard writes made under it with its fence",
            lock_name=self.name,
        )

    def _timed_out(self) -> LockTimeout:
        return LockTimeout(
            f"Redlock {self.name!r} was not acquired within {self.timeout} s on a "
            f"majority ({self._quorum}) of its {len(self._clients)} masters: it is held "
            "by another process or too many masters are unreachable; raise the timeout "
            "or check the masters",
            lock_name=self.name,
        )


def _granted(reply: Any) -> int | None:
    """A master's fence counter if it granted the lock, else None."""
    if isinstance(reply, list) and len(reply) == 2 and int(reply[0]) == 1:
        return int(reply[1])
    return None


def _is_one(reply: Any) -> bool:
    return isinstance(reply, int) and not isinstance(reply, bool) and reply == 1


def _is_lease(reply: Any) -> bool:
    """An extend script's answer that it extended: the new lease in ms (>= 1)."""
    return isinstance(reply, int) and not isinstance(reply, bool) and reply >= 1


def _raise_server_error(replies: Sequence[Any]) -> None:
    """When no master answered normally and one answered with an error (an ACL user
    without EVALSHA, a key of the wrong type), raise that error rather than retry
    forever."""
    if all(isinstance(reply, BaseException) for reply in replies):
        for reply in replies:
            if isinstance(reply, ResponseError):
                raise reply


def _check_masters(clients: Iterable[Any], name: str) -> list[AsyncClient]:
    if isinstance(clients, str | bytes) or not isinstance(clients, Iterable):
        raise TypeError(
            f"Redlock {name!r} needs a list of clients, one per independent master, got "
            f"{type(clients).__qualname__}"
        )
    masters: list[AsyncClient] = []
    seen: dict[tuple[Any, ...], int] = {}
    for index, client in enumerate(clients):
        master = check_async_client(client, "Redlock")
        if isinstance(master, redis.asyncio.cluster.RedisCluster):
            raise TypeError(
                f"Redlock {name!r} runs on independent masters, not on a Redis Cluster: "
                "pass one redis.asyncio.Redis per master, or use seawall.aio.Lock on "
                "the cluster"
            )
        pool = master.connection_pool
        identity = _redlock.master_identity(pool.connection_kwargs) or ("pool", id(pool))
        if identity in seen:
            raise ValueError(
                f"Redlock {name!r}: clients {seen[identity]} and {index} talk to the same "
                f"server ({identity[1:]}); a lock counted twice on one server fakes a "
                "majority: give each client its own independent master"
            )
        seen[identity] = index
        masters.append(master)
    if not masters:
        raise ValueError(f"Redlock {name!r} needs at least one client (3 or more advised)")
    warning = _redlock.master_count_warning(len(masters))
    if warning is not None:
        warnings.warn(f"Redlock {name!r}: {warning}", UserWarning, stacklevel=3)
    return masters
