"""The queue behind seawall.etcd.Lock and seawall.zookeeper.Lock, sync and asyncio.

The scenarios of the tests etcd keeps for its own `concurrency.Mutex` (a waiter whose
session ends while it waits, waiters served one at a time, try-locks of which one wins, a
waiter behind a vanished one that still waits for the holder, an unlock without a hold, a
holder locking again; docs/cp-lock-compat.md maps each Go test to its test here), told
again against seawall's locks; plus what an operator does to a lock by hand: revoke a
waiter's lease, delete its queued key or node, clear every key of a "stuck" lock. A
waiter whose place in the queue was taken away must never be granted the lock: it would
hold it beside whoever comes next."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from cplockworkers import make_lock
from kazoo.client import KazooClient
from kazoo.protocol.connection import _SESSION_EXPIRED
from owners import TaskOwner, ThreadOwner, owner_for

import seawall
import seawall.zookeeper
from seawall.etcd import _core as etcd_core

_numbers = itertools.count()


class Backend:
    """A CP lock backend, with the side door an operator uses on its data."""

    def __init__(self, name: str, server: Any) -> None:
        self.name = name
        self.server = server
        self._zk: KazooClient | None = None

    @property
    def address(self) -> str:
        return str(self.server.endpoint if self.name == "etcd" else self.server.hosts)

    def lock(self, world: str, name: str, ttl: float = 10.0) -> Any:
        if world == "sync":
            return make_lock(self.name, self.address, name, ttl)
        if self.name == "etcd":
            import seawall.etcd.aio

            return seawall.etcd.aio.Lock(self.address, name, ttl=ttl)
        import seawall.zookeeper.aio

        return seawall.zookeeper.aio.Lock(self.address, name, session_timeout=ttl)

    # -- the side door ---------------------------------------------------------------

    def _etcd(self, path: str, body: dict[str, Any]) -> Any:
        reply = httpx.post(self.address + path, json=body, timeout=10.0)
        reply.raise_for_status()
        return reply.json()

    def _zk_client(self) -> KazooClient:
        if self._zk is None:
            self._zk = KazooClient(hosts=self.address)
            self._zk.start(timeout=15)
        return self._zk

    def queue(self, lock: Any) -> list[str]:
        """The queued keys (etcd) or nodes (ZooKeeper) of `lock`, oldest first."""
        if self.name == "etcd":
            body = {
                "key": etcd_core.b64(lock.prefix),
                "range_end": etcd_core.prefix_end(lock.prefix),
                "sort_order": "ASCEND",
                "sort_target": "CREATE",
            }
            return [key for key, _ in etcd_core.kvs_of(self._etcd("/v3/kv/range", body))]
        zk = self._zk_client()
        if zk.exists(lock.path) is None:
            return []
        children = sorted(zk.get_children(lock.path), key=lambda child: child[-10:])
        return [f"{lock.path}/{child}" for child in children]

    def wait_queued(self, lock: Any, count: int) -> list[str]:
        deadline = time.monotonic() + 10.0
        while len(queued := self.queue(lock)) < count:
            assert time.monotonic() < deadline, f"only {queued} queued, waited for {count}"
            time.sleep(0.01)
        return queued

    def take_away(self, lock: Any, entry: str, how: str) -> None:
        """Take the queued `entry` of `lock` away: "revoke" its lease (etcd), "delete" it,
        or "clear" the whole lock (every entry, as `etcdctl del --prefix` or
        `deleteall` do to a lock thought stuck)."""
        if how == "revoke":
            lease = etcd_core.lease_of(entry.rsplit("/", 1)[1])
            self._etcd("/v3/lease/revoke", {"ID": str(lease)})
        elif how == "delete" and self.name == "etcd":
            self._etcd("/v3/kv/deleterange", {"key": etcd_core.b64(entry)})
        elif how == "delete":
            self._zk_client().delete(entry)
        elif self.name == "etcd":
            body = {
                "key": etcd_core.b64(lock.prefix),
                "range_end": etcd_core.prefix_end(lock.prefix),
            }
            self._etcd("/v3/kv/deleterange", body)
        else:
            # Not atomic, unlike etcd's: newest first, so the waiter's node is gone before
            # the holder's (deleted the other way round, the waiter could be granted the
            # lock for a moment, fairly, and lose it right after).
            zk = self._zk_client()
            for node in reversed(self.queue(lock)):
                zk.delete(node)
            zk.delete(lock.path)

    def close(self) -> None:
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()


@pytest.fixture(params=["etcd", "zookeeper"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    found = Backend(request.param, request.getfixturevalue(f"seawall_{request.param}"))
    yield found
    found.close()


def fresh() -> str:
    return f"queue-{next(_numbers)}-{uuid.uuid4().hex[:8]}"


async def outcome(task: asyncio.Task[Any], within: float) -> Any:
    """What `task` returned or raised, within `within` seconds."""
    done, _ = await asyncio.wait({task}, timeout=within)
    assert done, f"still waiting after {within} s"
    exc = task.exception()
    return exc if exc is not None else task.result()


async def both_ways(world: str, scenario: Any) -> None:
    """Run `scenario(make_owner)`, closing every owner it made."""
    made: list[ThreadOwner | TaskOwner] = []

    def make_owner() -> ThreadOwner | TaskOwner:
        made.append(owner_for(world))
        return made[-1]

    try:
        await scenario(make_owner)
    finally:
        for owner in made:
            await owner.close()


@pytest.mark.parametrize(
    ("backend_name", "how"),
    [
        ("etcd", "revoke"),
        ("etcd", "delete"),
        ("etcd", "clear"),
        ("zookeeper", "delete"),
        ("zookeeper", "clear"),
    ],
)
def test_a_waiter_whose_place_was_taken_away_is_refused_not_granted(
    request: pytest.FixtureRequest, world: str, backend_name: str, how: str
) -> None:
    """A waiter whose lease ends or whose key (node) is deleted while it waits is told
    so when its turn would come, naming the lock, as etcd's own mutex answers
    ErrSessionExpired; the next contender then gets the lock alone."""
    backend = Backend(backend_name, request.getfixturevalue(f"seawall_{backend_name}"))
    request.addfinalizer(backend.close)
    name = fresh()
    holder, waiter, third = (backend.lock(world, name) for _ in range(3))

    async def scenario(make_owner: Any) -> None:
        h, w, t = make_owner(), make_owner(), make_owner()
        assert await h.do(holder.acquire)
        waiting = asyncio.create_task(w.do(lambda: waiter.acquire(timeout=30.0)))
        queued = await asyncio.to_thread(backend.wait_queued, holder, 2)
        await asyncio.to_thread(backend.take_away, holder, queued[1], how)
        if how == "clear":
            with pytest.raises(seawall.LockNotOwnedError):
                await h.do(holder.release)
        else:
            await h.do(holder.release)
        refused = await outcome(waiting, 15.0)
        assert isinstance(refused, seawall.LockQueueLostError), refused
        assert refused.lock_name == name and repr(name) in str(refused)
        # Nobody holds it: the next contender gets it, and only it.
        assert await t.do(lambda: third.acquire(blocking=False))
        assert not await w.do(waiter.owned)
        assert not await w.do(lambda: waiter.acquire(blocking=False))
        await t.do(third.release)

    asyncio.run(both_ways(world, scenario))


def test_waiters_are_served_one_at_a_time(backend: Backend, world: str) -> None:
    name = fresh()
    locks = [backend.lock(world, name) for _ in range(5)]
    inside: list[int] = []
    ledger: list[tuple[str, int]] = []

    async def scenario(make_owner: Any) -> None:
        owners = [make_owner() for _ in locks]

        def visit(index: int) -> Any:
            lock = locks[index]

            def enter() -> Any:
                inside.append(index)
                ledger.append(("in", index))
                assert len(inside) == 1, f"{inside} inside together"

            def leave() -> None:
                ledger.append(("out", index))
                inside.remove(index)

            if world == "sync":

                def run() -> bool:
                    assert lock.acquire(timeout=30.0)
                    enter()
                    time.sleep(0.02)
                    leave()
                    lock.release()
                    return True

                return run

            async def run_async() -> bool:
                assert await lock.acquire(timeout=30.0)
                enter()
                await asyncio.sleep(0.02)
                leave()
                await lock.release()
                return True

            return run_async

        results = await asyncio.gather(*(o.do(visit(i)) for i, o in enumerate(owners)))
        assert results == [True] * 5

    asyncio.run(both_ways(world, scenario))
    assert sorted(i for what, i in ledger if what == "in") == list(range(5))
    assert all(ledger[k][0] == "in" and ledger[k + 1][0] == "out" for k in range(0, 10, 2))


def test_of_five_try_locks_one_wins(backend: Backend, world: str) -> None:
    name = fresh()
    locks = [backend.lock(world, name) for _ in range(5)]

    async def scenario(make_owner: Any) -> None:
        owners = [make_owner() for _ in locks]
        tries = [
            o.do(lambda lock=lock: lock.acquire(blocking=False))
            for o, lock in zip(owners, locks, strict=True)
        ]
        won = await asyncio.gather(*tries)
        assert sorted(won) == [False] * 4 + [True]
        winner = won.index(True)
        await owners[winner].do(locks[winner].release)

    asyncio.run(both_ways(world, scenario))


def test_a_release_without_a_hold_is_refused_before_and_after_one(
    backend: Backend, world: str
) -> None:
    """etcd's TestMutexUnlock: Unlock of a mutex never locked, and again after its
    Unlock, fails (ErrLockReleased there, LockNotOwnedError naming the lock here), and
    the lock works in between."""
    name = fresh()
    lock = backend.lock(world, name)

    async def scenario(make_owner: Any) -> None:
        owner = make_owner()
        with pytest.raises(seawall.LockNotOwnedError, match=name):
            await owner.do(lock.release)
        assert await owner.do(lock.acquire) is True
        await owner.do(lock.release)
        with pytest.raises(seawall.LockNotOwnedError, match=name):
            await owner.do(lock.release)
        assert not await owner.do(lock.locked)

    asyncio.run(both_ways(world, scenario))


def test_the_holder_acquiring_again_is_told_at_once_not_deadlocked(
    backend: Backend, world: str
) -> None:
    """etcd's TestMutexSessionRelock: a session locking a mutex it already holds must not
    deadlock (Go's Mutex, keyed by its session, grants it again). A seawall lock object is
    what the session is there: its owner acquiring it again gets LockError at once,
    blocking or timed, and keeps its hold."""
    name = fresh()
    lock = backend.lock(world, name)

    async def scenario(make_owner: Any) -> None:
        owner = make_owner()
        assert await owner.do(lock.acquire) is True
        for again in (lock.acquire, lambda: lock.acquire(timeout=5.0)):
            started = time.monotonic()
            with pytest.raises(seawall.LockError, match="not reentrant"):
                await owner.do(again)
            assert time.monotonic() - started < 2.0
        assert await owner.do(lock.owned)
        await owner.do(lock.release)

    asyncio.run(both_ways(world, scenario))


def test_a_waiter_behind_a_vanished_one_still_waits_for_the_holder(
    backend: Backend, world: str
) -> None:
    """The waiter next in line vanishes (its lease revoked, its node deleted) while the
    holder holds: the one behind it must not take the lock until the holder releases,
    and the vanished one is refused when the holder does."""
    name = fresh()
    holder, victim, newcomer = (backend.lock(world, name) for _ in range(3))
    how = "revoke" if backend.name == "etcd" else "delete"

    async def scenario(make_owner: Any) -> None:
        h, v, n = make_owner(), make_owner(), make_owner()
        assert await h.do(holder.acquire)
        victim_waits = asyncio.create_task(v.do(lambda: victim.acquire(timeout=30.0)))
        await asyncio.to_thread(backend.wait_queued, holder, 2)
        newcomer_waits = asyncio.create_task(n.do(lambda: newcomer.acquire(timeout=30.0)))
        queued = await asyncio.to_thread(backend.wait_queued, holder, 3)
        await asyncio.to_thread(backend.take_away, holder, queued[1], how)
        await asyncio.sleep(0.5)
        assert not newcomer_waits.done(), "the newcomer got the lock while it was held"
        await h.do(holder.release)
        assert await outcome(newcomer_waits, 15.0) is True
        refused = await outcome(victim_waits, 15.0)
        assert isinstance(refused, seawall.LockQueueLostError), refused
        await n.do(newcomer.release)

    asyncio.run(both_ways(world, scenario))


def test_a_zookeeper_waiter_whose_session_expires_queues_again_alone(
    seawall_zookeeper: Any,
) -> None:
    """A ZooKeeper waiter whose session expires while it waits queues again in its new
    session (it is not refused: nobody took its place away) and takes the lock through a
    node of that session, never through the expired session's node, which the server
    deletes when it gets round to that session."""
    backend = Backend("zookeeper", seawall_zookeeper)
    hosts, name = backend.address, fresh()
    holder = seawall.zookeeper.Lock(hosts, name, session_timeout=10.0)
    # A session of its own: sessions are shared per timeout.
    waiter = seawall.zookeeper.Lock(hosts, name, session_timeout=3.0)
    try:
        assert holder.acquire()
        got: list[Any] = []

        def wait() -> None:
            try:
                got.append(waiter.acquire(timeout=30.0) and waiter.fence)
            except Exception as exc:  # reported below
                got.append(exc)

        thread = threading.Thread(target=wait)
        thread.start()
        stale = backend.wait_queued(holder, 2)[1]
        stale_fence = backend._zk_client().exists(stale).czxid
        client = waiter._client
        old_session = client.client_id[0]
        # What kazoo does when a server answers that the session expired: drop it and
        # open a new one. (The server forgets the old one only after its timeout.)
        client._call(_SESSION_EXPIRED, None)
        deadline = time.monotonic() + 10.0
        while client.client_id is None or client.client_id[0] == old_session:
            assert time.monotonic() < deadline, "kazoo opened no new session"
            time.sleep(0.02)
        holder.release()
        thread.join(30.0)
        assert len(got) == 1 and isinstance(got[0], int), got
        # Held through a node of the new session, made after the stale one.
        assert got[0] > stale_fence
        assert backend._zk_client().exists(stale) is None
    finally:
        backend.close()
