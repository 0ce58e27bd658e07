"""Code that runs in child processes of the Redlock tests (multiprocessing "spawn").

Every worker builds its own clients from the masters' URLs; world is "sync" or "async".
Hold intervals are (start, end) in time.monotonic_ns(), one clock for all processes on
Linux: start is when acquire() returned, end the earlier of the release call and the end
of the validity the lock reported, so overlapping intervals are two holders at once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import random
import signal
import threading
import time
from typing import Any

import redis
import redis.asyncio
import redis.asyncio.connection
import redis.connection

import seawall
import seawall.aio
from seawall.locks import _redlock
from seawall.shared import _scripts

Interval = tuple[int, int]

# Synchronization objects handed to pool processes when they start (they cannot be sent
# with each task): see `share`.
SHARED: dict[str, Any] = {}


def share(objects: dict[str, Any]) -> None:
    """Pool initializer: keep a barrier or shared counter for the tasks of this process."""
    SHARED.update(objects)


def sync_clients(urls: list[str], **kwargs: Any) -> list[redis.Redis]:
    return [redis.Redis.from_url(url, **kwargs) for url in urls]


def async_clients(urls: list[str], **kwargs: Any) -> list[redis.asyncio.Redis]:
    return [redis.asyncio.Redis.from_url(url, **kwargs) for url in urls]


def counter_key(name: str) -> str:
    return f"redlock-counter:{name}"


# --- mutual exclusion: a read-modify-write under the lock --------------------------------


def count_under_redlock(urls: list[str], world: str, name: str, n: int) -> list[Interval]:
    if world == "async":
        return asyncio.run(_count_async(urls, name, n))
    clients = sync_clients(urls)
    lock = seawall.Redlock(clients, name, ttl=5.0, node_timeout=0.25, retry_delay=0.01, timeout=30)
    ledger = []
    for _ in range(n):
        with lock:
            entered = time.monotonic_ns()
            value = int(clients[0].get(counter_key(name)) or 0)
            clients[0].set(counter_key(name), value + 1)
            ledger.append((entered, time.monotonic_ns()))
    return ledger


async def _count_async(urls: list[str], name: str, n: int) -> list[Interval]:
    clients = async_clients(urls)
    lock = seawall.aio.Redlock(
        clients, name, ttl=5.0, node_timeout=0.25, retry_delay=0.01, timeout=30
    )
    ledger = []
    for _ in range(n):
        async with lock:
            entered = time.monotonic_ns()
            value = int(await clients[0].get(counter_key(name)) or 0)
            await clients[0].set(counter_key(name), value + 1)
            ledger.append((entered, time.monotonic_ns()))
    for client in clients:
        await client.aclose()
    return ledger


# --- acceptance 4: split votes -----------------------------------------------------------


def split_voter(
    urls: list[str], world: str, threads: int, rounds: int
) -> list[tuple[int, int, int, int]]:
    """`threads` clients (threads, or tasks) that start each round together on the lock
    "split:<round>". A client tries until it wins or sees the round won (locked()), then
    waits for the others; the winner releases after that. Returns one row per win:
    (round, attempts, acquired ns, validity end ns)."""
    barrier, won = SHARED["barrier"], SHARED["won"]
    if world == "async":
        return asyncio.run(_split_async(urls, threads, rounds, barrier, won))
    wins: list[tuple[int, int, int, int]] = []
    clients = sync_clients(urls)
    for client in clients:
        client.ping()

    def client_loop() -> None:
        rng = random.Random()
        for round_no in range(rounds):
            lock = seawall.Redlock(
                clients, f"split:{round_no}", ttl=2.0, node_timeout=0.25, retry_delay=0.02
            )
            barrier.wait(60)
            attempts = 0
            while attempts < 40:
                attempts += 1
                if lock.acquire(blocking=False):
                    now = time.monotonic_ns()
                    wins.append((round_no, attempts, now, now + int(lock.validity() * 1e9)))
                    won.value = round_no + 1
                    break
                if won.value > round_no:
                    break
                time.sleep(_redlock.retry_delay(lock.retry_delay, rng))
            barrier.wait(60)
            if lock.validity() > 0:
                lock.release()

    workers = [threading.Thread(target=client_loop) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return wins


async def _split_async(
    urls: list[str], tasks: int, rounds: int, barrier: Any, won: Any
) -> list[tuple[int, int, int, int]]:
    wins: list[tuple[int, int, int, int]] = []
    clients = async_clients(urls)
    for client in clients:
        await client.ping()
    loop = asyncio.get_running_loop()
    # Every task waits at the barrier at once: one thread each for those waits.
    waiters = concurrent.futures.ThreadPoolExecutor(max_workers=tasks)

    async def client_loop() -> None:
        rng = random.Random()
        for round_no in range(rounds):
            lock = seawall.aio.Redlock(
                clients, f"split:{round_no}", ttl=2.0, node_timeout=0.25, retry_delay=0.02
            )
            await loop.run_in_executor(waiters, barrier.wait, 60)
            attempts = 0
            while attempts < 40:
                attempts += 1
                if await lock.acquire(blocking=False):
                    now = time.monotonic_ns()
                    wins.append((round_no, attempts, now, now + int(lock.validity() * 1e9)))
                    won.value = round_no + 1
                    break
                if won.value > round_no:
                    break
                await asyncio.sleep(_redlock.retry_delay(lock.retry_delay, rng))
            await loop.run_in_executor(waiters, barrier.wait, 60)
            if lock.validity() > 0:
                await lock.release()

    await asyncio.gather(*(client_loop() for _ in range(tasks)))
    waiters.shutdown()
    for client in clients:
        await client.aclose()
    return wins


# --- acceptance 3: frozen masters and paused clients -------------------------------------


def trial_worker(
    urls: list[str],
    world: str,
    names: list[str],
    ttl: float,
    node_timeout: float,
    streams: int,
    target: int,
    until: float,
) -> list[tuple[str, int, int, int, float]]:
    """`streams` threads (or tasks) making single attempts on random names until the
    shared count of `attempts` reaches `target` (or time.monotonic() passes `until`). Each
    success is held to a random point of its validity and released, or held to the end of
    it and never released (a holder that went away). Returns (name, sent ns, acquired ns,
    hold end ns, reported validity) per success, (name, sent ns, -1, -1, 0.0) per failure."""
    attempts = SHARED["attempts"]
    if world == "async":
        return asyncio.run(
            _trials_async(urls, names, ttl, node_timeout, streams, attempts, target, until)
        )
    clients = sync_clients(urls, socket_timeout=1.0)
    rows: list[tuple[str, int, int, int, float]] = []

    def more(rng: random.Random) -> bool:
        with attempts.get_lock():
            attempts.value += 1
            return attempts.value <= target and time.monotonic() < until

    def stream() -> None:
        rng = random.Random()
        while more(rng):
            name = rng.choice(names)
            lock = seawall.Redlock(clients, name, ttl=ttl, node_timeout=node_timeout, renew=False)
            sent = time.monotonic_ns()
            if not lock.acquire(blocking=False):
                rows.append((name, sent, -1, -1, 0.0))
                time.sleep(rng.uniform(0, ttl / 10))
                continue
            acquired = time.monotonic_ns()
            validity = lock.validity()
            end = acquired + int(validity * 1e9)
            if rng.random() < 0.5:
                time.sleep(rng.uniform(0, validity))
                end = min(end, time.monotonic_ns())
                with contextlib.suppress(seawall.LockNotOwnedError):
                    lock.release()
            else:
                time.sleep(validity)
            rows.append((name, sent, acquired, end, validity))

    workers = [threading.Thread(target=stream) for _ in range(streams)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return rows


async def _trials_async(
    urls: list[str],
    names: list[str],
    ttl: float,
    node_timeout: float,
    streams: int,
    attempts: Any,
    target: int,
    until: float,
) -> list[tuple[str, int, int, int, float]]:
    clients = async_clients(urls, socket_timeout=1.0)
    rows: list[tuple[str, int, int, int, float]] = []

    def more() -> bool:
        with attempts.get_lock():
            attempts.value += 1
            return attempts.value <= target and time.monotonic() < until

    async def stream() -> None:
        rng = random.Random()
        while more():
            name = rng.choice(names)
            lock = seawall.aio.Redlock(
                clients, name, ttl=ttl, node_timeout=node_timeout, renew=False
            )
            sent = time.monotonic_ns()
            if not await lock.acquire(blocking=False):
                rows.append((name, sent, -1, -1, 0.0))
                await asyncio.sleep(rng.uniform(0, ttl / 10))
                continue
            acquired = time.monotonic_ns()
            validity = lock.validity()
            end = acquired + int(validity * 1e9)
            if rng.random() < 0.5:
                await asyncio.sleep(rng.uniform(0, validity))
                end = min(end, time.monotonic_ns())
                with contextlib.suppress(seawall.LockNotOwnedError):
                    await lock.release()
            else:
                await asyncio.sleep(validity)
            rows.append((name, sent, acquired, end, validity))

    await asyncio.gather(*(stream() for _ in range(streams)))
    for client in clients:
        await client.aclose()
    return rows


class _PausingConnection(redis.connection.Connection):
    """Stops its whole process (SIGSTOP) after sending a command, before reading the reply:
    a client paused at the worst moment of an acquire. Armed through `_PAUSE`."""

    def send_command(self, *args: Any, **kwargs: Any) -> None:
        self.acquiring = _is_acquire(args)
        super().send_command(*args, **kwargs)
        _sent(self.acquiring)

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        if getattr(self, "acquiring", False):
            _pause_once()
        return super().read_response(*args, **kwargs)


class _AsyncPausingConnection(redis.asyncio.connection.Connection):
    async def send_command(self, *args: Any, **kwargs: Any) -> None:
        self.acquiring = _is_acquire(args)
        await super().send_command(*args, **kwargs)
        _sent(self.acquiring)

    async def read_response(self, *args: Any, **kwargs: Any) -> Any:
        if getattr(self, "acquiring", False):
            _pause_once()
        return await super().read_response(*args, **kwargs)


# Armed before an acquire: the process stops once the acquire script has been sent to a
# majority of the masters, at its next read, so their replies wait in the sockets while
# it is stopped (and the validity check, not only the per-node timeout, must reject them).
_PAUSE: dict[str, Any] = {"armed": False, "pipe": None, "sent": 0, "masters": 0}
_PAUSE_MUTEX = threading.Lock()


_ACQUIRE_SCRIPT = _scripts.load("seawall.locks", "redlock_acquire")


def _is_acquire(args: tuple[Any, ...]) -> bool:
    """Whether a command runs the Redlock acquire script (by SHA or by source)."""
    return len(args) > 1 and str(args[1]) in (_ACQUIRE_SCRIPT.sha, _ACQUIRE_SCRIPT.source)


def _sent(acquiring: bool) -> None:
    if acquiring:
        with _PAUSE_MUTEX:
            _PAUSE["sent"] += 1


def _pause_once() -> None:
    with _PAUSE_MUTEX:
        if not _PAUSE["armed"] or _PAUSE["sent"] < _PAUSE["masters"]:
            return
        _PAUSE["armed"] = False
    _PAUSE["pipe"].send(("stopping",))
    os.kill(os.getpid(), signal.SIGSTOP)


def paused_client(
    urls: list[str], world: str, names: list[str], ttl: float, runs: int, pipe: Any
) -> list[tuple[str, int, bool, float]]:
    """`runs` acquire attempts, each paused by SIGSTOP between sending and reading (the
    parent resumes it after more than the ttl; an attempt that did not stop is retried).
    Returns (name, sent ns, acquired, validity) per run."""
    _PAUSE["pipe"] = pipe
    _PAUSE["masters"] = _redlock.quorum(len(urls))
    if world == "async":
        return asyncio.run(_paused_async(urls, names, ttl, runs))
    clients = [
        redis.Redis(
            connection_pool=redis.ConnectionPool.from_url(url, connection_class=_PausingConnection)
        )
        for url in urls
    ]
    rows = []
    for run in range(3 * runs):
        name = names[run % len(names)]
        lock = seawall.Redlock(clients, name, ttl=ttl, node_timeout=ttl / 2.5, renew=False)
        sent = time.monotonic_ns()
        _PAUSE.update(armed=True, sent=0)
        acquired = lock.acquire(blocking=False)
        stopped, _PAUSE["armed"] = not _PAUSE["armed"], False
        if stopped:  # (a master skipped as busy can leave too few requests to stop at)
            rows.append((name, sent, acquired, lock.validity()))
        if acquired:
            lock.release()
        time.sleep(0.2)  # let calls left behind by the pause finish
        if len(rows) == runs:
            break
    pipe.send(("done", rows))
    return rows


async def _paused_async(
    urls: list[str], names: list[str], ttl: float, runs: int
) -> list[tuple[str, int, bool, float]]:
    clients = [
        redis.asyncio.Redis(
            connection_pool=redis.asyncio.ConnectionPool.from_url(
                url, connection_class=_AsyncPausingConnection
            )
        )
        for url in urls
    ]
    rows = []
    for run in range(3 * runs):
        name = names[run % len(names)]
        lock = seawall.aio.Redlock(clients, name, ttl=ttl, node_timeout=ttl / 2.5, renew=False)
        sent = time.monotonic_ns()
        _PAUSE.update(armed=True, sent=0)
        acquired = await lock.acquire(blocking=False)
        stopped, _PAUSE["armed"] = not _PAUSE["armed"], False
        if stopped:
            rows.append((name, sent, acquired, lock.validity()))
        if acquired:
            await lock.release()
        await asyncio.sleep(0.2)
        if len(rows) == runs:
            break
    for client in clients:
        await client.aclose()
    _PAUSE["pipe"].send(("done", rows))
    return rows
