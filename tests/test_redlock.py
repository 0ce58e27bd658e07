"""seawall.Redlock and seawall.aio.Redlock against five real independent masters.

Each test body is written once, for the asyncio API; in the "sync" world it drives
seawall.Redlock through a thin adapter that makes every call in one thread of its own (a
sync lock refuses the event loop's thread, and its owner is the thread).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import itertools
import time
import warnings
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import redis
import redis.asyncio
import redis.cluster
from conftest import SPAWN
from redlockworkers import count_under_redlock, counter_key

import seawall
import seawall.aio
from seawall.locks import _redlock
from seawall.shared import _keys


class SyncRedlock:
    """seawall.Redlock with the asyncio API's shape, for one test body in both worlds:
    every call and attribute read runs in the adapter's own thread, the lock's owner."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._thread = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        self.lock = self._in_thread(seawall.Redlock, *args, **kwargs)

    def _in_thread(self, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return self._thread.submit(call, *args, **kwargs).result()

    def __getattr__(self, name: str) -> Any:
        value = self._in_thread(getattr, self.lock, name)
        if name in ("acquire", "release", "extend", "locked", "owned"):

            async def call(*args: Any, **kwargs: Any) -> Any:
                loop = asyncio.get_running_loop()
                return await loop.run_in_executor(
                    self._thread, functools.partial(value, *args, **kwargs)
                )

            return call
        if callable(value):
            return functools.partial(self._in_thread, value)
        return value

    async def __aenter__(self) -> Any:
        await asyncio.get_running_loop().run_in_executor(self._thread, self.lock.__enter__)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await asyncio.get_running_loop().run_in_executor(
            self._thread, functools.partial(self.lock.__exit__, *exc)
        )


class World:
    """Clients and lock factory of one world over the session's five masters."""

    def __init__(self, name: str, urls: list[str]) -> None:
        self.name = name
        self.urls = urls
        self.admins = [redis.Redis.from_url(url) for url in urls]

    def clients(self) -> list[Any]:
        if self.name == "sync":
            return [redis.Redis.from_url(url) for url in self.urls]
        return [redis.asyncio.Redis.from_url(url) for url in self.urls]

    def lock(self, clients: list[Any], name: str, **kwargs: Any) -> Any:
        # Per-node timeouts with room for this shared, loaded machine (not under test here).
        kwargs.setdefault("node_timeout", min(0.25, kwargs.get("ttl", 10.0) / 4))
        if self.name == "sync":
            return SyncRedlock(clients, name, **kwargs)
        return seawall.aio.Redlock(clients, name, **kwargs)

    def run(self, body: Callable[[World], Awaitable[None]]) -> None:
        asyncio.run(body(self))

    def lock_keys(self) -> list[bytes]:
        """Redlock keys left on any master, fence counters and memories of released tokens
        aside (they outlive a hold on purpose, but expire by themselves: checked here)."""
        left = []
        for admin in self.admins:
            for key in admin.keys("seawall:redlock:*"):
                if key.endswith((b":fence", b":released")):
                    assert admin.pttl(key) > 0, f"{key!r} never expires"
                else:
                    left.append(key)
        return left


@pytest.fixture
def masters(seawall_master_clients: list[redis.Redis], world: str) -> World:
    urls = [
        f"redis://127.0.0.1:{c.connection_pool.connection_kwargs['port']}/0"
        for c in seawall_master_clients
    ]
    return World(world, urls)


# --- the basic contract -------------------------------------------------------------------


def test_acquire_validity_fence_release(masters: World) -> None:
    async def body(w: World) -> None:
        clients = w.clients()
        a = w.lock(clients, "basic", ttl=5.0)
        b = w.lock(clients, "basic", ttl=5.0, retry_delay=0.02)
        with pytest.raises(seawall.LockError, match="no fence yet"):
            _ = a.fence
        assert a.validity() == 0.0
        assert await a.acquire()
        assert a.attempts == 1
        assert 5.0 - _redlock.drift(5.0) - 0.3 < a.validity() <= 5.0 - _redlock.drift(5.0)
        first = a.fence
        assert await a.owned() and await a.locked()
        assert not await b.owned()
        started = time.monotonic()
        assert await b.acquire(timeout=0.3) is False
        assert 0.25 <= time.monotonic() - started <= 1.0
        assert b.attempts >= 3  # retried after random delays
        assert await b.acquire(blocking=False) is False
        await a.release()
        assert a.validity() == 0.0
        assert not await a.locked()
        assert await b.acquire(blocking=False)
        assert b.fence > first
        await b.release()
        assert w.lock_keys() == []
        with pytest.raises(seawall.LockNotOwnedError, match="'basic'"):
            await b.release()

    masters.run(body)


def test_context_manager_and_lock_timeout(masters: World) -> None:
    async def body(w: World) -> None:
        clients = w.clients()
        holder = w.lock(clients, "cm", ttl=5.0)
        async with holder:
            assert await holder.owned()
            waiter = w.lock(clients, "cm", ttl=5.0, timeout=0.2, retry_delay=0.05)
            with pytest.raises(seawall.LockTimeout, match=r"'cm'.*majority \(3\) of its 5"):
                async with waiter:
                    pass
        assert not await holder.locked()

    masters.run(body)


def test_not_reentrant(masters: World) -> None:
    async def body(w: World) -> None:
        lock = w.lock(w.clients(), "reent", ttl=5.0)
        assert await lock.acquire()
        with pytest.raises(seawall.LockError, match="not reentrant"):
            await lock.acquire(blocking=False)
        await lock.release()

    masters.run(body)


def test_extend_needs_a_majority_within_the_validity(masters: World) -> None:
    async def body(w: World) -> None:
        clients = w.clients()
        lock = w.lock(clients, "ext", ttl=0.5, renew=False)
        assert await lock.acquire()
        await lock.extend(ttl=5.0)
        assert lock.validity() > 4.5
        assert sum(4000 < admin.pttl(lock.key) <= 5000 for admin in w.admins) >= 3
        # Another owner takes the key on 3 masters: the next extend finds no majority.
        for admin in w.admins[:3]:
            admin.set(lock.key, "someone-else", px=10_000)
        with pytest.raises(seawall.LockNotOwnedError, match="'ext'"):
            await lock.extend()
        assert lock.validity() == 0.0
        assert not await lock.owned()
        with pytest.raises(seawall.LockNotOwnedError):
            await lock.release()
        assert [admin.get(lock.key) for admin in w.admins[:3]] == [b"someone-else"] * 3
        assert all(admin.get(lock.key) is None for admin in w.admins[3:])

    masters.run(body)


def test_expired_holder_cannot_release_the_next_one(masters: World) -> None:
    async def body(w: World) -> None:
        clients = w.clients()
        old = w.lock(clients, "expiry", ttl=0.2, renew=False)
        new = w.lock(clients, "expiry", ttl=5.0)
        assert await old.acquire()
        await asyncio.sleep(0.3)
        assert old.validity() == 0.0
        assert not await old.owned()
        assert await new.acquire(blocking=False)
        with pytest.raises(seawall.LockNotOwnedError, match="validity"):
            await old.release()
        assert await new.owned()
        with pytest.raises(seawall.LockNotOwnedError):
            await old.extend()
        assert await new.owned()
        await new.release()

    masters.run(body)


# Leases of a fraction of a second, renewed at a third of that: a latency bound, measured
# alone after the parallel part (`scripts/dev.py test`), as the other serial tests are.
@pytest.mark.serial
def test_renewal_keeps_a_short_lock_then_stops(masters: World) -> None:
    async def body(w: World) -> None:
        clients = w.clients()
        lost: list[int] = []
        lock = w.lock(clients, "renew", ttl=0.3, on_lost=lambda lk: lost.append(lk.fence))
        assert await lock.acquire()
        await asyncio.sleep(1.0)  # more than 3 ttls
        assert await lock.owned()
        assert lost == []
        await lock.release()
        await asyncio.sleep(0.3)
        assert w.lock_keys() == []

    masters.run(body)


def test_on_lost_fires_when_a_majority_is_taken_away(masters: World) -> None:
    async def body(w: World) -> None:
        clients = w.clients()
        lost: list[float] = []
        lock = w.lock(clients, "lost", ttl=0.3, on_lost=lambda lk: lost.append(time.monotonic()))
        assert await lock.acquire()
        for admin in w.admins[:3]:
            admin.delete(lock.key)
        deadline = time.monotonic() + 2
        while not lost and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert lost, "on_lost never fired"
        assert not await lock.owned()
        with pytest.raises(seawall.LockNotOwnedError):
            await lock.release()

    masters.run(body)


def test_fence_stays_increasing_when_counters_drift_apart(masters: World) -> None:
    """A hold's fence is the highest counter among its granting majority; lagging masters
    are raised to it, so a later majority without the leading master still goes past it."""

    async def body(w: World) -> None:
        clients = w.clients()
        lock = w.lock(clients, "drift", ttl=5.0)
        fence_key = f"{lock.key}:fence"
        for admin in w.admins[1:]:
            admin.set(fence_key, 50)
        w.admins[0].set(fence_key, 100)  # failed attempts had run master 0 ahead
        assert await lock.acquire()
        assert lock.fence == 101
        await lock.release()
        assert sum(int(a.get(fence_key) or 0) >= 101 for a in w.admins) >= 3
        # Master 0 now refuses (another's key): a majority from masters 1-4 grants.
        w.admins[0].set(lock.key, "someone-else", px=10_000)
        fresh = w.lock(w.clients(), "drift", ttl=5.0)
        assert await fresh.acquire()
        assert fresh.fence > 101
        await fresh.release()

    masters.run(body)


def test_keys_share_one_hash_slot(masters: World) -> None:
    for name in ("orders:42", "{user:1}:lock", "}odd"):
        lock = masters.lock(masters.clients(), name)
        slot = redis.cluster.key_slot
        assert slot(lock.key.encode()) == slot(f"{lock.key}:fence".encode())
        assert _keys.hash_tag(lock.key) is not None


def test_mutual_exclusion_across_processes(masters: World) -> None:
    per_process, processes = 40, 3
    with SPAWN.Pool(processes) as pool:
        ledgers = pool.starmap(
            count_under_redlock, [(masters.urls, masters.name, "mx", per_process)] * processes
        )
    assert int(masters.admins[0].get(counter_key("mx"))) == per_process * processes
    intervals = sorted(interval for ledger in ledgers for interval in ledger)
    assert sum(1 for a, b in itertools.pairwise(intervals) if b[0] < a[1]) == 0
    assert masters.lock_keys() == []


# --- acceptance 9: bad input ---------------------------------------------------------------


def test_same_server_twice_is_refused(seawall_masters: Any) -> None:
    urls = [m.url for m in seawall_masters]
    one = redis.Redis.from_url(urls[0])
    with pytest.raises(ValueError, match=r"clients 0 and 3 talk to the same server"):
        seawall.Redlock([one, *(redis.Redis.from_url(u) for u in urls[1:3]), one], "dup")
    port = seawall_masters[0].port
    aliases = [
        redis.Redis(host="localhost", port=port, db=1),
        redis.Redis.from_url(urls[1]),
        redis.Redis.from_url(f"redis://127.0.0.1:{port}/2"),
    ]
    with pytest.raises(ValueError, match="same server"):
        seawall.Redlock(aliases, "dup")
    with pytest.raises(ValueError, match="same server"):
        seawall.aio.Redlock([redis.asyncio.Redis.from_url(urls[0])] * 3, "dup")


def test_few_or_even_masters_warn(seawall_masters: Any) -> None:
    clients = [m.client() for m in seawall_masters]
    for count in (1, 2, 4):
        with pytest.warns(UserWarning, match=r"Redlock 'w'.*(3 or more|odd number)"):
            seawall.Redlock(clients[:count], "w")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        seawall.Redlock(clients[:3], "w")
        seawall.Redlock(clients, "w")


def test_bad_arguments_raise(seawall_masters: Any) -> None:
    clients = [m.client() for m in seawall_masters]
    for ttl in (0, -1, 0.0):
        with pytest.raises(ValueError, match="ttl of Redlock 'b'"):
            seawall.Redlock(clients, "b", ttl=ttl)
    with pytest.raises(ValueError, match="node_timeout"):
        seawall.Redlock(clients, "b", ttl=1.0, node_timeout=0.6)
    with pytest.raises(ValueError, match="at least one client"):
        seawall.Redlock([], "b")
    with pytest.raises(TypeError, match="list of clients"):
        seawall.Redlock(clients[0], "b")
    with pytest.raises(TypeError, match=r"use seawall\.aio\.Redlock"):
        seawall.Redlock([redis.asyncio.Redis.from_url(m.url) for m in seawall_masters], "b")
    # Only the type matters (checked before any use), so no cluster needs to run here.
    cluster = redis.cluster.RedisCluster.__new__(redis.cluster.RedisCluster)
    with pytest.raises(TypeError, match="independent masters, not on a Redis Cluster"):
        seawall.Redlock([cluster, *clients[:2]], "b")


def test_an_error_from_every_master_is_raised_not_retried(seawall_masters: Any) -> None:
    admins = [m.client() for m in seawall_masters]
    for admin in admins:
        admin.acl_setuser(
            "nolua",
            enabled=True,
            passwords=["+pw"],
            keys=["*"],
            commands=["+@all", "-evalsha", "-eval"],
        )
    try:
        clients = [
            redis.Redis(host="127.0.0.1", port=m.port, username="nolua", password="pw")
            for m in seawall_masters
        ]
        lock = seawall.Redlock(clients, "acl", ttl=5.0, node_timeout=0.25)
        started = time.monotonic()
        with pytest.raises(redis.exceptions.NoPermissionError):
            lock.acquire(timeout=5)
        assert time.monotonic() - started < 2
    finally:
        for admin in admins:
            admin.acl_deluser("nolua")
