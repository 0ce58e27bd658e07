"""seawall.etcd.aio.Lock: a lock kept by etcd (Raft), with the API of seawall.aio.Lock.

A hold is one key under the lock's prefix attached to an etcd lease (its id chosen here,
so a grant whose reply is lost can still be revoked); see seawall.etcd._core for the
queue recipe. Acquire is one txn when the lock is free (plus a grant when this object has
no live lease left from an earlier release); a waiter watches the key just ahead of it
and is woken by its deletion. The lease is kept alive at a third of its ttl by seawall's
shared renewer while held; release deletes the key (waking the next waiter) and keeps
the lease for the object's next acquire. A holder that dies frees the lock when its lease
runs out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from seawall.errors import LockError, LockNotOwnedError, LockQueueLostError, LockTimeout
from seawall.etcd import _core
from seawall.etcd._async.gateway import AsyncGateway, get_gateway
from seawall.etcd._core import EtcdError
from seawall.locks import _lease
from seawall.locks._async.holder import AsyncHolder, Hold, HoldTable, left_until
from seawall.locks._async.renewer import get_renewer
from seawall.shared import _concurrency
from seawall.shared._concurrency import async_owner, async_sleep, async_spawn
from seawall.shared._validate import check_acquire_wait, check_name, check_seconds, check_timeout

# After a broken watch (etcd restarting, a dropped connection) a waiter tries again after
# this long, doubling up to a second.
RETRY = 0.05

# A waiter that timed out waits this long at most for etcd to delete its queued key
# before acquire returns False; past it the lease is revoked in the background.
GIVE_BACK = 0.5


def check_endpoint(endpoint: Any) -> str:
    if not isinstance(endpoint, str) or not endpoint.startswith(("http://", "https://")):
        raise TypeError(
            "seawall.etcd.Lock needs the URL of an etcd client endpoint as a str, such as "
            f"'http://127.0.0.1:2379', got {endpoint!r}"
        )
    return endpoint


class AsyncEtcdLock(AsyncHolder):
    """seawall.etcd.aio.Lock: a lock kept by an etcd cluster, granted by a Raft
    majority, so a failover never grants it twice. The API of seawall.aio.Lock (without
    extend and replicas).

    `ttl` is the lease: a holder (or waiter) that stops renewing it, because it died,
    froze or lost etcd, loses its place within `ttl` (whole seconds, rounded up; etcd may
    raise a short one to its minimum, about 2 s for a default single member).
    """

    _PUBLIC = "seawall.etcd.aio.Lock"

    def __init__(
        self,
        endpoint: str,
        name: str,
        ttl: float = 10.0,
        *,
        timeout: float | None = None,
        on_lost: Callable[[AsyncEtcdLock], Any] | None = None,
    ) -> None:
        self.endpoint = check_endpoint(endpoint)
        self.name = check_name(name, "etcd Lock")
        self.ttl = check_seconds(ttl, f"ttl of lock {name!r}", minimum=_core.MIN_TTL)
        self.timeout = check_timeout(timeout, f"timeout of lock {name!r}")
        if on_lost is not None and not callable(on_lost):
            raise TypeError(f"on_lost of lock {name!r} must be callable, got {on_lost!r}")
        self._on_lost = on_lost
        self._prefix = _core.prefix_of(name)
        self._table = HoldTable()
        # Leases that releases left alive: (lease id, granted ttl, local deadline).
        self._spares: list[tuple[int, int, float]] = []

    def __repr__(self) -> str:
        state = "held" if self._table.count() else "not held"
        return f"<seawall.etcd.Lock {self.name!r} at {self.endpoint} ttl={self.ttl}s {state}>"

    @property
    def prefix(self) -> str:
        """The etcd key prefix under which holders and waiters queue."""
        return self._prefix

    def _get_gateway(self) -> AsyncGateway:
        return get_gateway(self.endpoint)

    async def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        """Take the lock; True when taken, False when `timeout` passed (or not blocking).

        `timeout` defaults to the constructor's (None: as long as it takes). A waiter is
        woken by the deletion of the key ahead of it, never by polling.
        """
        wait_for = check_acquire_wait(blocking, timeout, self.timeout, self._label)
        me = self._acquiring_owner()
        if self._table.current(me) is not None:
            raise LockError(
                f"lock {self.name!r} is already held by this caller; seawall.etcd.Lock is "
                "not reentrant: release it first",
                lock_name=self.name,
            )
        deadline = None if wait_for is None else _concurrency.monotonic() + wait_for
        gateway = self._get_gateway()
        seconds = _core.lease_seconds(self.ttl)
        while True:
            spare = self._take_spare()
            try:
                if spare is not None:
                    lease, granted, lease_until = spare
                else:
                    lease = _core.new_lease_id()
                    sent = _concurrency.monotonic()
                    granted = await gateway.grant(lease, seconds, deadline)
                    lease_until = sent + granted
                queued = await self._queue(gateway, lease, granted, lease_until, blocking, deadline)
            except EtcdError as exc:
                self._revoke_later(lease)
                if spare is not None and exc.code == _core.NOT_FOUND:
                    continue  # the spare lease was gone after all: grant a new one
                raise
            except TimeoutError:
                self._revoke_later(lease)
                return False
            except BaseException:
                self._revoke_later(lease)
                raise
            if queued is None:
                # Timed out waiting: etcd answers, so take the key back before returning
                # (bounded: a slow etcd is left to a background revoke), or a locked()
                # right after acquire returned False would still see the lock taken.
                bound = _concurrency.monotonic() + GIVE_BACK if blocking else None
                await self._withdraw(gateway, lease, granted, lease_until, bound)
                return False
            revision, lease_until = queued
            if revision < 0:  # our queued key expired while we waited: queue again
                self._revoke_later(lease)
                continue
            hold = Hold(_core.token_of(lease), revision, me, float(granted), lease_until)
            self._table.add(hold)
            get_renewer().add(self, hold, _core.renew_at(lease_until, granted))
            return True

    async def _withdraw(
        self,
        gateway: AsyncGateway,
        lease: int,
        granted: int,
        lease_until: float,
        deadline: float | None,
    ) -> None:
        """Take back a failed try's queued key and keep its lease for the next try (a
        try-lock loop then costs one txn and one delete per try, no grant). Past
        `deadline` the lease is revoked in the background instead."""
        key = _core.b64(self._prefix + _core.token_of(lease))
        try:
            await gateway.call("/v3/kv/deleterange", {"key": key}, deadline)
        except Exception:
            self._revoke_later(lease)
            return
        except BaseException:
            self._revoke_later(lease)
            raise
        self._spares.append((lease, granted, lease_until))

    def _take_spare(self) -> tuple[int, int, float] | None:
        """A lease a release of this object left alive, if it has long enough to live
        (see `_core.spare_usable`); one that has not is revoked."""
        while self._spares:
            try:
                spare = self._spares.pop()
            except IndexError:  # another thread took it
                return None
            if _core.spare_usable(spare[2], spare[1], _concurrency.monotonic()):
                return spare
            self._revoke_later(spare[0])
        return None

    async def _queue(
        self,
        gateway: AsyncGateway,
        lease: int,
        ttl: int,
        lease_until: float,
        blocking: bool,
        deadline: float | None,
    ) -> tuple[int, float] | None:
        """Queue `lease`'s key and wait for its turn: (its create revision, the lease's
        deadline) once it holds the lock, None when not blocking or past the deadline,
        a revision of -1 if the lease expired meanwhile."""
        key = self._prefix + _core.token_of(lease)
        reply = await gateway.call(
            "/v3/kv/txn", _core.enqueue_body(self._prefix, key, lease), deadline
        )
        revision, ahead, _ = _core.enqueued(reply, key)
        watch_from = int(reply["header"]["revision"]) + 1
        pause = RETRY
        looked_early = None  # the key ahead for which a watch already looked early
        while ahead is not None:
            if not blocking:
                return None
            remaining = left_until(deadline)
            if remaining is not None and remaining <= 0:
                return None
            try:
                if ahead:
                    slice_ = _core.wait_slice(ttl, remaining)
                    # Once per key ahead: a store that keeps moving (other waiters
                    # queueing) must not turn the wait into a loop of looks.
                    early = ahead != looked_early
                    looked_early = ahead
                    outcome = await gateway.watch_delete(ahead, watch_from, slice_, early)
                    if outcome == _core.SILENT:
                        # A silent slice: keep our queued key alive, then look again.
                        sent = _concurrency.monotonic()
                        if await gateway.keepalive(lease, deadline) <= 0:
                            return self._place_gone(lease_until)
                        lease_until = sent + ttl
                # Even when the only key ahead is gone, look again: our own key may have
                # gone too (its lease revoked, or the keys deleted by hand), and a
                # waiter granted without it would hold the lock beside the next one.
                reply = await gateway.call(
                    "/v3/kv/txn", _core.recheck_body(self._prefix, key, revision), deadline
                )
            except ConnectionError:
                # etcd restarting or unreachable: try again while the lease may last.
                if _concurrency.monotonic() >= lease_until:
                    return -1, lease_until
                await async_sleep(min(pause, left_until(deadline) or pause))
                pause = min(pause * 2, 1.0)
                continue
            pause = RETRY
            present, ahead, _ = _core.rechecked(reply)
            if not present:
                return self._place_gone(lease_until)
            watch_from = int(reply["header"]["revision"]) + 1
        return revision, lease_until

    def _place_gone(self, lease_until: float) -> tuple[int, float]:
        """Our queued key is gone. Past its lease's local deadline it expired (a pause,
        etcd unreachable): queue again (a revision of -1). Before it, someone else took
        it away (revoked its lease, deleted the key): LockQueueLostError, as etcd's own
        mutex answers ErrSessionExpired."""
        if _concurrency.monotonic() >= lease_until:
            return -1, lease_until
        raise LockQueueLostError(
            f"etcd lock {self.name!r} was not acquired: while this caller waited, its "
            f"queued key under {self._prefix!r} was deleted or its lease revoked by someone "
            "else (as `etcdctl del --prefix` or `etcdctl lease revoke` do); acquire again "
            "to queue anew",
            lock_name=self.name,
        )

    def _revoke_later(self, lease: int) -> None:
        """Revoke `lease` in the background (its grant or put may yet happen on a frozen
        etcd), trying until its ttl is over: by then etcd drops it anyway."""
        gateway = self._get_gateway()
        give_up = _concurrency.monotonic() + _core.lease_seconds(self.ttl) + 1.0

        async def revoke() -> None:
            pause = RETRY
            while True:
                try:
                    await gateway.revoke(lease, give_up)
                    return
                except (TimeoutError, ConnectionError):
                    if _concurrency.monotonic() + pause >= give_up:
                        raise
                await async_sleep(pause)
                pause = min(pause * 2, 1.0)

        async_spawn(revoke, f"revoke of {self._label()}")

    async def release(self) -> None:
        """Give back the caller's hold (deleting its key wakes the next waiter);
        LockNotOwnedError if the caller holds none, or if its lease was lost.

        The lease itself stays alive for this object's next acquire (which then needs no
        grant); unused, it runs out on its own within the ttl.
        """
        hold = self._table.take(async_owner())
        if hold is None:
            raise self._not_held("release")
        get_renewer().discard(hold)
        if hold.lost:
            # Its lease is already being revoked (see _lose): asking etcd could only add
            # a ConnectionError (etcd restarting) to the LockNotOwnedError owed here.
            raise self._not_owned(hold, "release")
        gateway = self._get_gateway()
        lease = _core.lease_of(hold.token)
        body = _core.release_body(self._prefix + hold.token, hold.fence)
        try:
            reply = await gateway.call("/v3/kv/txn", body, None)
        except BaseException:
            self._revoke_later(lease)
            raise
        if not reply.get("succeeded") or hold.lost:
            self._revoke_later(lease)
            raise self._not_owned(hold, "release")
        self._spares.append((lease, int(hold.ttl), hold.deadline))

    async def locked(self) -> bool:
        """Whether anyone holds the lock now."""
        body = {
            "key": _core.b64(self._prefix),
            "range_end": _core.prefix_end(self._prefix),
            "count_only": True,
        }
        reply = await self._get_gateway().call("/v3/kv/range", body, None)
        return int(reply.get("count", 0)) > 0

    async def _holds(self, hold: Hold) -> bool:
        key = self._prefix + hold.token
        reply = await self._get_gateway().call(
            "/v3/kv/range", {"key": _core.b64(key), "keys_only": True}, None
        )
        found = _core.kvs_of(reply)
        return bool(found) and found[0][1] == hold.fence

    async def _renew(self, hold: object) -> float | None:
        """Called by the renewer: keep the lease alive; when to renew next, or None."""
        assert isinstance(hold, Hold)
        if hold.released or hold.lost:
            return None
        sent = _concurrency.monotonic()
        if sent >= hold.deadline:
            self._lose(hold)
            return None
        try:
            left = await self._get_gateway().keepalive(_core.lease_of(hold.token), hold.deadline)
        except (TimeoutError, ConnectionError, EtcdError) as exc:
            now = _concurrency.monotonic()
            if now >= hold.deadline:
                self._lose(hold)
                return None
            _concurrency.log.info("renewing %s failed, retrying: %r", self._label(), exc)
            return _lease.retry_at(now, hold.ttl, hold.deadline)
        if hold.released:
            return None
        if left <= 0:
            self._lose(hold)
            return None
        hold.deadline = sent + left
        return _lease.renew_at(sent, hold.ttl)

    def _lose(self, hold: Hold) -> None:
        """Mark `hold` lost and revoke its lease: etcd may still keep it (a restart that
        restored it after our deadline), and it must not block the next holder."""
        self._mark_lost(hold)
        self._revoke_later(_core.lease_of(hold.token))

    def _label(self) -> str:
        return f"etcd lock {self.name!r}"

    def _lost_warning(self, hold: Hold) -> str:
        return (
            f"etcd lock {self.name!r} lost its lease (fence {hold.fence}); another process "
            "may hold it now"
        )

    def _not_owned(self, hold: Hold, action: str) -> LockNotOwnedError:
        return LockNotOwnedError(
            f"cannot {action} etcd lock {self.name!r}: its lease (fence {hold.fence}) was "
            "lost, so another process may have held it meanwhile; writes made under this "
            "hold must be guarded by its fence (seawall.fenced_write, or UPDATE ... WHERE "
            "fence < :fence)",
            lock_name=self.name,
        )

    def _timed_out(self) -> LockTimeout:
        return LockTimeout(
            f"etcd lock {self.name!r} was not acquired within {self.timeout} s: it is held "
            f"by another process; raise the timeout or find the holder (keys under "
            f"{self._prefix!r} at {self.endpoint})",
            lock_name=self.name,
        )
