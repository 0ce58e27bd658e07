"""Every wait is bounded by the caller's timeout, whatever the client's socket timeout.

The server is frozen with SIGSTOP (a safety timer thaws it after FREEZE_LIMIT, so code
that ignores the timeout fails in seconds instead of hanging): a caller with timeout=1.0
gets its False, LockTimeout, CacheWaitTimeout or IdempotencyTimeout within BOUND seconds,
with socket_timeout=None (a blocked read would never end) and with socket_timeout=5.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
import redis.asyncio
from waiting import wait_until

import seawall
import seawall.aio
from seawall.errors import CacheWaitTimeout, IdempotencyTimeout

TIMEOUT = 1.0
BOUND = 2.5  # TIMEOUT plus a generous margin for a loaded machine
FREEZE_LIMIT = 8.0

SOCKET_TIMEOUTS = [None, 5.0]
LOCKS = ["lock", "rlock", "semaphore", "read", "write"]


@contextlib.contextmanager
def frozen(server: Any) -> Iterator[None]:
    """SIGSTOP `server` for the block (FREEZE_LIMIT at most), SIGCONT after it."""
    server.pause()
    thaw = threading.Timer(FREEZE_LIMIT, server.resume)
    thaw.daemon = True
    thaw.start()
    try:
        yield
    finally:
        thaw.cancel()
        if server.paused:
            server.resume()


def sync_lock(kind: str, client: Any, name: str) -> Any:
    if kind == "lock":
        return seawall.Lock(client, name, timeout=TIMEOUT)
    if kind == "rlock":
        return seawall.RLock(client, name, timeout=TIMEOUT)
    if kind == "semaphore":
        return seawall.Semaphore(client, name, value=2, timeout=TIMEOUT)
    rw = seawall.RWLock(client, name, timeout=TIMEOUT)
    return rw.read() if kind == "read" else rw.write()


def async_lock(kind: str, client: Any, name: str) -> Any:
    if kind == "lock":
        return seawall.aio.Lock(client, name, timeout=TIMEOUT)
    if kind == "rlock":
        return seawall.aio.RLock(client, name, timeout=TIMEOUT)
    if kind == "semaphore":
        return seawall.aio.Semaphore(client, name, value=2, timeout=TIMEOUT)
    rw = seawall.aio.RWLock(client, name, timeout=TIMEOUT)
    return rw.read() if kind == "read" else rw.write()


def timed(call: Callable[[], Any]) -> tuple[float, Any]:
    started = time.monotonic()
    try:
        outcome = call()
    except Exception as exc:
        outcome = exc
    return time.monotonic() - started, outcome


async def async_timed(call: Callable[[], Any]) -> tuple[float, Any]:
    started = time.monotonic()
    try:
        outcome = await call()
    except Exception as exc:
        outcome = exc
    return time.monotonic() - started, outcome


# --- locks: acquire(timeout=1.0) against a frozen server ----------------------------------


@pytest.mark.parametrize("socket_timeout", SOCKET_TIMEOUTS)
@pytest.mark.parametrize("kind", LOCKS)
def test_sync_acquire_is_bounded_by_its_timeout(
    seawall_server_factory: Any, kind: str, socket_timeout: float | None
) -> None:
    server = seawall_server_factory()
    r = redis.Redis.from_url(server.url, socket_timeout=socket_timeout)
    admin = redis.Redis.from_url(server.url)
    try:
        warm = sync_lock(kind, r, "frozen")
        assert warm.acquire()  # the pool and its connection are in use, as in real life
        warm.release()
        lock = sync_lock(kind, r, "frozen")
        with frozen(server):
            took, outcome = timed(lock.acquire)
        assert outcome is False, f"{kind}: acquire gave {outcome!r} after {took:.1f} s"
        assert took < BOUND, f"{kind}: acquire(timeout={TIMEOUT}) waited {took:.1f} s"
        # A token the frozen server may have granted is given back in the background.
        key = main_key(kind, lock)
        wait_until(lambda: not _held(admin, kind, key), 10, f"{kind}: cleanup of a timed-out try")
        assert sync_lock(kind, r, "frozen").acquire(blocking=False)
    finally:
        r.close()
        admin.close()


@pytest.mark.parametrize("socket_timeout", SOCKET_TIMEOUTS)
@pytest.mark.parametrize("kind", LOCKS)
def test_async_acquire_is_bounded_by_its_timeout(
    seawall_server_factory: Any, kind: str, socket_timeout: float | None
) -> None:
    server = seawall_server_factory()
    admin = redis.Redis.from_url(server.url)

    async def main() -> tuple[float, Any]:
        r = redis.asyncio.Redis.from_url(server.url, socket_timeout=socket_timeout)
        try:
            warm = async_lock(kind, r, "frozen")
            assert await warm.acquire()
            await warm.release()
            lock = async_lock(kind, r, "frozen")
            with frozen(server):
                took, outcome = await async_timed(lock.acquire)
            key = main_key(kind, lock)
            end = time.monotonic() + 10
            while _held(admin, kind, key):
                assert time.monotonic() < end, f"{kind}: a timed-out try was never cleaned up"
                await asyncio.sleep(0.01)
            assert await async_lock(kind, r, "frozen").acquire(blocking=False)
            return took, outcome
        finally:
            await r.aclose()

    try:
        took, outcome = asyncio.run(main())
    finally:
        admin.close()
    assert outcome is False, f"{kind}: acquire gave {outcome!r} after {took:.1f} s"
    assert took < BOUND, f"{kind}: acquire(timeout={TIMEOUT}) waited {took:.1f} s"


def main_key(kind: str, lock: Any) -> str:
    """The key that shows a hold: a lock's token, a semaphore's or readers' zset."""
    if kind == "read":
        return str(lock.rwlock.keys.readers)
    if kind == "write":
        return str(lock.rwlock.keys.writer)
    return str(lock.key)


def _held(admin: Any, kind: str, key: str) -> bool:
    """Whether anything still holds the primitive's main key (a lock token, permits)."""
    kind_of_key = admin.type(key)
    if kind_of_key == b"none":
        return False
    if kind_of_key == b"zset":
        return bool(admin.zcard(key))
    if kind_of_key == b"hash":
        return bool(admin.hlen(key))
    return True


def test_sync_with_block_raises_lock_timeout(seawall_server_factory: Any) -> None:
    server = seawall_server_factory()
    r = redis.Redis.from_url(server.url)
    try:
        lock = seawall.Lock(r, "frozen", timeout=TIMEOUT)
        with lock:
            pass
        started = time.monotonic()
        with frozen(server), pytest.raises(seawall.LockTimeout), lock:
            pass
        assert time.monotonic() - started < BOUND
    finally:
        r.close()


# --- the cache: a caller waiting on another process's load --------------------------------


@pytest.mark.parametrize("socket_timeout", SOCKET_TIMEOUTS)
def test_sync_cache_wait_is_bounded(seawall_server_factory: Any, socket_timeout: float) -> None:
    server = seawall_server_factory()
    loader_client = redis.Redis.from_url(server.url)
    r = redis.Redis.from_url(server.url, socket_timeout=socket_timeout)
    loading, finish = threading.Event(), threading.Event()

    def slow_loader() -> str:
        loading.set()
        finish.wait(20)
        return "value"

    loader_cache = seawall.Cache(loader_client, "frozen", lease=30.0)
    waiter = seawall.Cache(r, "frozen", lease=30.0, wait_timeout=TIMEOUT)
    holder = threading.Thread(target=lambda: loader_cache.get_or_load("k", slow_loader))
    holder.start()
    outcome: list[Any] = []
    try:
        assert loading.wait(10)
        # Another process (another cache object: no shared in-process flight) waits.
        started = time.monotonic()
        wait = threading.Thread(
            target=lambda: outcome.append(timed(lambda: waiter.get_or_load("k", str))[1])
        )
        wait.start()
        wait_until(lambda: waiter.stats().waits >= 1, 10, "the wait on the load")
        with frozen(server):
            wait.join(FREEZE_LIMIT + 2)
            took = time.monotonic() - started
        assert isinstance(outcome[0], CacheWaitTimeout), outcome
        assert took < BOUND, f"get_or_load(wait_timeout={TIMEOUT}) waited {took:.1f} s"
    finally:
        finish.set()
        holder.join(10)
        loader_client.close()
        r.close()


@pytest.mark.parametrize("socket_timeout", SOCKET_TIMEOUTS)
def test_async_cache_wait_is_bounded(seawall_server_factory: Any, socket_timeout: float) -> None:
    server = seawall_server_factory()

    async def main() -> tuple[float, Any]:
        loader_client = redis.asyncio.Redis.from_url(server.url)
        r = redis.asyncio.Redis.from_url(server.url, socket_timeout=socket_timeout)
        loading, finish = asyncio.Event(), asyncio.Event()

        async def slow_loader() -> str:
            loading.set()
            await finish.wait()
            return "value"

        loader_cache = seawall.aio.Cache(loader_client, "frozen", lease=30.0)
        waiter = seawall.aio.Cache(r, "frozen", lease=30.0, wait_timeout=TIMEOUT)
        holder = asyncio.create_task(loader_cache.get_or_load("k", slow_loader))
        try:
            await asyncio.wait_for(loading.wait(), 10)
            started = time.monotonic()
            wait = asyncio.create_task(async_timed(lambda: waiter.get_or_load("k", str)))
            end = time.monotonic() + 10
            while waiter.stats().waits < 1:
                assert time.monotonic() < end, "the wait on the load did not start"
                await asyncio.sleep(0.01)
            with frozen(server):
                done, _ = await asyncio.wait({wait}, timeout=FREEZE_LIMIT + 2)
                took = time.monotonic() - started
            assert done, "get_or_load never returned"
            return took, wait.result()[1]
        finally:
            finish.set()
            await asyncio.wait_for(holder, 10)
            await loader_client.aclose()
            await r.aclose()

    took, outcome = asyncio.run(main())
    assert isinstance(outcome, CacheWaitTimeout), outcome
    assert took < BOUND, f"get_or_load(wait_timeout={TIMEOUT}) waited {took:.1f} s"


# --- Idempotent: a duplicate waiting on a running claimant --------------------------------


@pytest.mark.parametrize("socket_timeout", SOCKET_TIMEOUTS)
def test_sync_idempotent_wait_is_bounded(
    seawall_server_factory: Any, socket_timeout: float
) -> None:
    server = seawall_server_factory()
    holder_client = redis.Redis.from_url(server.url)
    r = redis.Redis.from_url(server.url, socket_timeout=socket_timeout)
    running, finish = threading.Event(), threading.Event()

    def handler() -> str:
        running.set()
        finish.wait(20)
        return "done"

    first = seawall.Idempotent(holder_client, "frozen")
    duplicate = seawall.Idempotent(r, "frozen", timeout=TIMEOUT)
    assert duplicate.recorded("warm") == (False, None)  # the client has a pooled connection
    holder = threading.Thread(target=lambda: first.run("m", handler))
    holder.start()
    try:
        assert running.wait(10)
        with frozen(server):
            took, outcome = timed(lambda: duplicate.run("m", handler))
        assert isinstance(outcome, IdempotencyTimeout), outcome
        assert took < BOUND, f"Idempotent(timeout={TIMEOUT}).run waited {took:.1f} s"
    finally:
        finish.set()
        holder.join(10)
        holder_client.close()
        r.close()


@pytest.mark.parametrize("socket_timeout", SOCKET_TIMEOUTS)
def test_async_idempotent_wait_is_bounded(
    seawall_server_factory: Any, socket_timeout: float
) -> None:
    server = seawall_server_factory()

    async def main() -> tuple[float, Any]:
        holder_client = redis.asyncio.Redis.from_url(server.url)
        r = redis.asyncio.Redis.from_url(server.url, socket_timeout=socket_timeout)
        running, finish = asyncio.Event(), asyncio.Event()

        async def handler() -> str:
            running.set()
            await finish.wait()
            return "done"

        first = seawall.aio.Idempotent(holder_client, "frozen")
        duplicate = seawall.aio.Idempotent(r, "frozen", timeout=TIMEOUT)
        assert await duplicate.recorded("warm") == (False, None)
        holder = asyncio.create_task(first.run("m", handler))
        try:
            await asyncio.wait_for(running.wait(), 10)
            with frozen(server):
                return await async_timed(lambda: duplicate.run("m", handler))
        finally:
            finish.set()
            await asyncio.wait_for(holder, 10)
            await holder_client.aclose()
            await r.aclose()

    took, outcome = asyncio.run(main())
    assert isinstance(outcome, IdempotencyTimeout), outcome
    assert took < BOUND, f"Idempotent(timeout={TIMEOUT}).run waited {took:.1f} s"


# --- a re-entry and a replicated acquire make a round trip that must be bounded too -------


@pytest.mark.parametrize("socket_timeout", SOCKET_TIMEOUTS)
def test_sync_rlock_reentry_is_bounded(
    seawall_server_factory: Any, socket_timeout: float | None
) -> None:
    """A re-entry never waits for the lock, but its one round trip must not outlast the
    timeout either: against a frozen server it answers False in time, and the hold it
    already had is still there (and released) after the thaw."""
    server = seawall_server_factory()
    r = redis.Redis.from_url(server.url, socket_timeout=socket_timeout)
    try:
        lock = seawall.RLock(r, "reentry", ttl=30.0, timeout=TIMEOUT)
        assert lock.acquire()
        with frozen(server):
            took, outcome = timed(lock.acquire)
        assert outcome is False, f"re-entry gave {outcome!r} after {took:.1f} s"
        assert took < BOUND, f"re-entry with timeout={TIMEOUT} waited {took:.1f} s"
        lock.release()
        assert not lock.locked()
    finally:
        r.close()


def test_async_rlock_reentry_is_bounded(seawall_server_factory: Any) -> None:
    server = seawall_server_factory()

    async def main() -> tuple[float, Any, bool]:
        r = redis.asyncio.Redis.from_url(server.url, socket_timeout=None)
        try:
            lock = seawall.aio.RLock(r, "reentry", ttl=30.0, timeout=TIMEOUT)
            assert await lock.acquire()
            with frozen(server):
                took, outcome = await async_timed(lock.acquire)
            await lock.release()
            return took, outcome, await lock.locked()
        finally:
            await r.aclose()

    took, outcome, still_locked = asyncio.run(main())
    assert outcome is False, f"re-entry gave {outcome!r} after {took:.1f} s"
    assert took < BOUND, f"re-entry with timeout={TIMEOUT} waited {took:.1f} s"
    assert not still_locked


@pytest.mark.parametrize("socket_timeout", SOCKET_TIMEOUTS)
def test_sync_replicated_acquire_is_bounded(
    seawall_server_factory: Any, socket_timeout: float | None
) -> None:
    """replicas=1 sends the script and WAIT as one pipeline: bounded by the timeout too."""
    server = seawall_server_factory()
    r = redis.Redis.from_url(server.url, socket_timeout=socket_timeout)
    admin = redis.Redis.from_url(server.url)
    try:
        lock = seawall.Lock(r, "replicated", timeout=TIMEOUT, replicas=1, replica_timeout=0.05)
        with frozen(server):
            took, outcome = timed(lock.acquire)
        assert outcome is False, f"acquire gave {outcome!r} after {took:.1f} s"
        assert took < BOUND, f"acquire(timeout={TIMEOUT}) waited {took:.1f} s"
        wait_until(lambda: not admin.exists(lock.key), 10, "cleanup of a timed-out try")
    finally:
        r.close()
        admin.close()
