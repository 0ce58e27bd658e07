"""seawall.zookeeper.aio.Lock: a lock kept by ZooKeeper (ZAB), with the API of
seawall.aio.Lock.

One hold is one ephemeral sequential node under the lock's parent (see
seawall.zookeeper._core for the recipe), created in the process's shared session. A
waiter watches the node just ahead of it and is woken by its deletion. While held, the
shared renewer reads the node every third of the session timeout: each read both proves
the hold still exists and restarts the server's session clock, so the local lease
deadline (last proof + session timeout) is never later than the server's expiry. A
holder that dies frees the lock when its session expires.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kazoo.exceptions import (
    ConnectionLoss,
    KazooException,
    NoNodeError,
    SessionExpiredError,
)

from seawall.errors import LockError, LockNotOwnedError, LockQueueLostError, LockTimeout
from seawall.locks import _lease
from seawall.locks._async.holder import AsyncHolder, Hold, HoldTable, left_until
from seawall.locks._async.renewer import get_renewer
from seawall.shared import _concurrency
from seawall.shared._bounded import last_look
from seawall.shared._concurrency import async_offload, async_owner, async_sleep
from seawall.shared._validate import check_acquire_wait, check_name, check_seconds, check_timeout
from seawall.zookeeper import _core
from seawall.zookeeper._calls import AsyncSignal, async_result
from seawall.zookeeper._session import (
    delete_eventually,
    granted_timeout,
    is_open,
    session_for,
)

# A request that lost its connection (the server restarting) is tried again after this
# long, doubling up to a second.
RETRY = 0.05

# Connecting the process's session the first time waits at most this long without a
# timeout of the caller's own.
CONNECT_TIMEOUT = 15.0

# A waiter that gives up waits this long at most for its queued node's deletion before
# acquire returns False (the deletion goes on in the background after that): once
# acquire has returned, locked() and other processes no longer see the abandoned node.
GIVE_BACK = 0.5


def _delete_when_created(pending: Any, client: Any) -> None:
    """Delete the node a create request makes, whenever it completes: the caller gave up
    (timed out, cancelled, failed), and a node left behind would block the lock for as
    long as this process's session lives."""

    def created(result: Any) -> None:
        if result.exception is None:
            delete_eventually(client, result.value[0])

    pending.rawlink(created)


class AsyncZooKeeperLock(AsyncHolder):
    """seawall.zookeeper.aio.Lock: a lock kept by a ZooKeeper ensemble, granted by a
    ZAB quorum, so a failover never grants it twice. The API of seawall.aio.Lock
    (without extend and replicas).

    `hosts` is a connection string ('h1:2181,h2:2181,h3:2181'). `session_timeout` is the
    lease: a holder (or waiter) whose process dies, freezes or loses the ensemble loses
    its place once the session expires (the server grants between 2 and 20 of its ticks).
    """

    _PUBLIC = "seawall.zookeeper.aio.Lock"

    def __init__(
        self,
        hosts: str,
        name: str,
        *,
        timeout: float | None = None,
        session_timeout: float = 10.0,
        on_lost: Callable[[AsyncZooKeeperLock], Any] | None = None,
    ) -> None:
        self.hosts = _core.check_hosts(hosts)
        self.name = check_name(name, "zookeeper Lock")
        self.session_timeout = check_seconds(
            session_timeout, f"session_timeout of lock {name!r}", minimum=0.1
        )
        self.timeout = check_timeout(timeout, f"timeout of lock {name!r}")
        if on_lost is not None and not callable(on_lost):
            raise TypeError(f"on_lost of lock {name!r} must be callable, got {on_lost!r}")
        self._on_lost = on_lost
        self._parent = _core.parent_of(name)
        self._table = HoldTable()
        self._client: Any = None

    def __repr__(self) -> str:
        state = "held" if self._table.count() else "not held"
        return f"<seawall.zookeeper.Lock {self.name!r} at {self.hosts} {state}>"

    @property
    def path(self) -> str:
        """The node under which holders and waiters queue."""
        return self._parent

    async def _session(self, deadline: float | None) -> Any:
        if self._client is None or not is_open(self._client):
            left = left_until(deadline)
            wait = CONNECT_TIMEOUT if left is None else max(left, _lease.MIN_RETRY)
            self._client = await async_offload(session_for, self.hosts, self.session_timeout, wait)
        return self._client

    async def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        """Take the lock; True when taken, False when `timeout` passed (or not blocking).

        `timeout` defaults to the constructor's (None: as long as it takes). A waiter is
        woken by the deletion of the node ahead of it, never by polling.
        """
        wait_for = check_acquire_wait(blocking, timeout, self.timeout, self._label)
        me = self._acquiring_owner()
        if self._table.current(me) is not None:
            raise LockError(
                f"lock {self.name!r} is already held by this caller; seawall.zookeeper.Lock "
                "is not reentrant: release it first",
                lock_name=self.name,
            )
        deadline = None if wait_for is None else _concurrency.monotonic() + wait_for
        try:
            client = await self._session(deadline)
        except TimeoutError:
            if deadline is None:
                raise
            return False
        pause = RETRY
        while True:
            sent = _concurrency.monotonic()
            pending = client.create_async(
                f"{self._parent}/{_core.node_prefix(_core.new_token())}",
                b"",
                ephemeral=True,
                sequence=True,
                makepath=True,
                include_data=True,
            )
            try:
                path, stat = await async_result(pending, last_look(deadline))
                acquired = await self._wait_turn(
                    client, path, int(stat.ephemeralOwner), blocking, deadline
                )
            except SessionExpiredError:
                # The session expired before the lock was ours (a restart or freeze it
                # did not survive, seen on a loaded machine): its node, if made, went
                # with it (or goes when the server gets round to the session: deleted
                # now, so it does not hold up the next place), and kazoo is opening a
                # new session. Queue again in that one.
                _delete_when_created(pending, client)
                acquired = None
            except TimeoutError:
                _delete_when_created(pending, client)
                return False
            except BaseException:
                _delete_when_created(pending, client)
                raise
            if acquired is not None:
                break
            remaining = left_until(deadline)
            if not blocking or (remaining is not None and remaining <= pause):
                return False
            await async_sleep(pause)
            pause = min(pause * 2, 1.0)
            # A session closed under us (close_all) is not reopened by kazoo, and every
            # request in it fails as expired: queue again in the process's next session.
            try:
                client = await self._session(deadline)
            except TimeoutError:
                if deadline is None:
                    raise
                return False
        if not acquired:
            await self._give_back(client, path)
            return False
        ttl = granted_timeout(client, self.session_timeout)
        hold = Hold(path, int(stat.czxid), me, ttl, sent + ttl)
        self._table.add(hold)
        get_renewer().add(self, hold, _lease.renew_at(sent, ttl))
        return True

    async def _give_back(self, client: Any, path: str) -> None:
        """Delete the queued node `path` of a try that did not get the lock, waiting up to
        GIVE_BACK for the server: a node deleted only later (as kazoo's callback thread
        got round to it) showed the lock taken to a locked() right after acquire returned
        False, and to other processes. A slow or unreachable server is left to
        delete_eventually."""
        try:
            await async_result(client.delete_async(path), _concurrency.monotonic() + GIVE_BACK)
        except (NoNodeError, SessionExpiredError):
            return  # gone already, or with the session
        except (KazooException, TimeoutError):
            delete_eventually(client, path)
        except BaseException:
            delete_eventually(client, path)
            raise

    async def _wait_turn(
        self, client: Any, path: str, session: int, blocking: bool, deadline: float | None
    ) -> bool | None:
        """Wait until `path` (made in `session`) is the first node; False when not
        blocking or past the deadline, None if its session expired (queue again).
        LockQueueLostError if someone deleted it while its session lived."""
        mine = path.rsplit("/", 1)[1]
        pause = RETRY
        while True:
            try:
                children = await async_result(
                    client.get_children_async(self._parent), last_look(deadline)
                )
            except NoNodeError:
                children = []  # the whole lock was deleted, our node with it
            except ConnectionLoss:
                # The server is restarting or the connection broke: kazoo reconnects
                # within the session, and the queued node (ephemeral) stays ours.
                remaining = left_until(deadline)
                if not blocking or (remaining is not None and remaining <= pause):
                    return False
                await async_sleep(pause)
                pause = min(pause * 2, 1.0)
                continue
            pause = RETRY
            current = client.client_id
            if current is None or int(current[0]) != session:
                # The session that made our node expired (kazoo opened a new one): the
                # node is gone, or goes when the server gets round to that session (a
                # lagging server may still list it). Never hold the lock through it: the
                # next contender would hold it too once it goes. Queue again.
                delete_eventually(client, path)
                return None
            if mine not in children:
                raise self._place_taken()
            ahead = _core.predecessor(children, mine)
            if ahead is None:
                return True
            remaining = left_until(deadline)
            if not blocking or (remaining is not None and remaining <= 0):
                return False
            signal = AsyncSignal()
            try:
                stat = await async_result(
                    client.exists_async(f"{self._parent}/{ahead}", watch=signal.set),
                    last_look(deadline),
                )
            except ConnectionLoss:
                continue  # looked at again (and retried) above
            if stat is None:
                continue  # gone before the watch was set: look again at once
            # A session that expires or is closed takes its watches along without firing
            # them: a change of the session's state wakes the waiter too, to look again.
            client.add_listener(signal.set)
            try:
                await signal.wait(min(_core.WAIT_SLICE, remaining or _core.WAIT_SLICE))
            finally:
                client.remove_listener(signal.set)

    def _place_taken(self) -> LockQueueLostError:
        """Our queued node is gone while the session that made it lives: someone else
        deleted it."""
        return LockQueueLostError(
            f"zookeeper lock {self.name!r} was not acquired: while this caller waited, its "
            f"queued node under {self._parent!r} was deleted by someone else (as `delete` "
            "or `deleteall` in zkCli do); acquire again to queue anew",
            lock_name=self.name,
        )

    async def release(self) -> None:
        """Give back the caller's hold (deleting its node wakes the next waiter);
        LockNotOwnedError if the caller holds none, or if its session was lost."""
        hold = self._table.take(async_owner())
        if hold is None:
            raise self._not_held("release")
        get_renewer().discard(hold)
        client = self._client
        if hold.lost:
            # Its node is already being deleted (see _lose); the server need not be
            # asked, and must not be: a reconnecting session would answer ConnectionLoss
            # instead of the LockNotOwnedError a lost hold owes its caller.
            raise self._not_owned(hold, "release")
        try:
            await async_result(client.delete_async(hold.token), None)
        except (NoNodeError, SessionExpiredError):
            raise self._not_owned(hold, "release") from None
        except BaseException:
            delete_eventually(client, hold.token)
            raise
        if hold.lost:
            raise self._not_owned(hold, "release")

    async def locked(self) -> bool:
        """Whether anyone holds the lock now."""
        client = await self._session(None)
        try:
            children = await async_result(client.get_children_async(self._parent), None)
        except NoNodeError:
            return False
        return any(_core.sequence_of(child) is not None for child in children)

    async def _holds(self, hold: Hold) -> bool:
        try:
            stat = await async_result(self._client.exists_async(hold.token), hold.deadline)
        except (KazooException, TimeoutError):
            return False
        return stat is not None and int(stat.czxid) == hold.fence

    async def _renew(self, hold: object) -> float | None:
        """Called by the renewer: prove the node (and session) alive; when to look next."""
        assert isinstance(hold, Hold)
        if hold.released or hold.lost:
            return None
        sent = _concurrency.monotonic()
        if sent >= hold.deadline:
            self._lose(hold)
            return None
        try:
            stat = await async_result(self._client.exists_async(hold.token), hold.deadline)
        except (KazooException, TimeoutError) as exc:
            now = _concurrency.monotonic()
            if now >= hold.deadline:
                self._lose(hold)
                return None
            _concurrency.log.info("checking %s failed, retrying: %r", self._label(), exc)
            return _lease.retry_at(now, hold.ttl, hold.deadline)
        if hold.released:
            return None
        if stat is None:
            self._lose(hold)
            return None
        hold.deadline = sent + hold.ttl
        return _lease.renew_at(sent, hold.ttl)

    def _lose(self, hold: Hold) -> None:
        """Mark `hold` lost and delete its node: a session that outlived our deadline (a
        server restarted after it) must not keep blocking the next holder."""
        self._mark_lost(hold)
        delete_eventually(self._client, hold.token)

    def _label(self) -> str:
        return f"zookeeper lock {self.name!r}"

    def _lost_warning(self, hold: Hold) -> str:
        return (
            f"zookeeper lock {self.name!r} lost its session (fence {hold.fence}); another "
            "process may hold it now"
        )

    def _not_owned(self, hold: Hold, action: str) -> LockNotOwnedError:
        return LockNotOwnedError(
            f"cannot {action} zookeeper lock {self.name!r}: its session (fence {hold.fence}) "
            "was lost, so another process may have held it meanwhile; writes made under "
            "this hold must be guarded by its fence (seawall.fenced_write, or UPDATE ... "
            "WHERE fence < :fence)",
            lock_name=self.name,
        )

    def _timed_out(self) -> LockTimeout:
        return LockTimeout(
            f"zookeeper lock {self.name!r} was not acquired within {self.timeout} s: it is "
            f"held by another process; raise the timeout or find the holder (children of "
            f"{self._parent!r} at {self.hosts})",
            lock_name=self.name,
        )
