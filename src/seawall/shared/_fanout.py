"""One request to each of several independent masters at once (Redlock's rounds).

`async_each_node` and `each_node` are the asyncio and sync faces, re-exported under those
paired names by `seawall.shared._concurrency`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import queue
import threading
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from time import monotonic
from typing import Any, TypeVar

from redis.exceptions import ResponseError

T = TypeVar("T")

N = TypeVar("N")

# Sync Redlock requests run on this many shared daemon threads at most (per process): never
# a pool per acquire, and daemon threads so that a call stuck on a frozen master cannot
# hold up interpreter exit.
NODE_POOL_SIZE = 16
NODE_POOL_IDLE_EXIT = 5.0


def retrieve_outcome(task: asyncio.Future[Any]) -> None:
    # A call cancelled at its timeout may still end in an error; retrieve it so asyncio
    # does not report it as never retrieved.
    if not task.cancelled():
        task.exception()


async def async_each_node(
    clients: Sequence[Any], command: Sequence[Any], timeout: float
) -> list[Any]:
    """Send `command` to every client's server at once; each reply, or the exception it
    raised (TimeoutError when no reply came within `timeout`: the call is cancelled)."""
    tasks = [asyncio.ensure_future(client.execute_command(*command)) for client in clients]
    try:
        await asyncio.wait(tasks, timeout=max(timeout, 0.0))
    finally:
        late = [task for task in tasks if not task.done()]
        for task in late:
            task.cancel()
            task.add_done_callback(retrieve_outcome)
    results: list[Any] = []
    for task in tasks:
        if task in late or task.cancelled():
            results.append(TimeoutError(f"no answer within {timeout:g} s"))
        else:
            results.append(task.exception() or task.result())
    return results


class _NodePool:
    """A few daemon threads, started on demand, shared by every sync Redlock (and by
    every call bounded by a deadline, see seawall.shared._bounded).

    A call stuck past its timeout (a frozen server, a client without socket_timeout)
    cannot be interrupted; `stuck(+1)` lets one more thread start in its place, so stuck
    calls never starve the others, and `stuck(-1)` takes the allowance back once it ends.
    """

    def __init__(self, size: int, name: str = "seawall-node", linger: int | None = None) -> None:
        self._size = size
        self._name = name
        # Threads beyond this many leave after NODE_POOL_IDLE_EXIT idle (None: the size).
        self._linger = linger
        self._work: queue.SimpleQueue[tuple[Future[Any], Callable[[Any], Any], Any]] = (
            queue.SimpleQueue()
        )
        self._idle = threading.Semaphore(0)  # one release per worker waiting for work
        self._threads = 0
        self._mutex = threading.Lock()

    def submit(self, call: Callable[[N], T], node: N) -> Future[T]:
        future: Future[T] = Future()
        self._work.put((future, call, node))
        if not self._idle.acquire(blocking=False):
            self._grow()
        return future

    def stuck(self, change: int) -> None:
        with self._mutex:
            self._size += change
        if change > 0 and not self._work.empty():
            self._grow()

    def _grow(self) -> None:
        with self._mutex:
            if self._threads >= self._size:
                return
            self._threads += 1
        threading.Thread(target=self._run, name=self._name, daemon=True).start()

    def _run(self) -> None:
        while True:
            try:
                future, call, node = self._work.get(timeout=NODE_POOL_IDLE_EXIT)
            except queue.Empty:
                # Threads started for stuck calls leave once those calls have ended; the
                # idle token taken here is this thread's own, so no submit counts on it.
                with self._mutex:
                    keep = self._size if self._linger is None else min(self._linger, self._size)
                    if self._threads > keep and self._idle.acquire(blocking=False):
                        self._threads -= 1
                        return
                continue
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(call(node))
                except BaseException as exc:
                    future.set_exception(exc)
            del future, call, node  # drop references before idling
            self._idle.release()


_node_pool: _NodePool | None = None
_node_pool_mutex = threading.Lock()
# Clients (by id: the call keeps its client alive) with a request on the pool threads
# still unanswered. Such a client is skipped by everyone until it answers, so a frozen
# master without a socket_timeout ties up one pool thread per client, never all of them.
_in_flight: dict[int, int] = {}


def _get_node_pool() -> _NodePool:
    global _node_pool
    with _node_pool_mutex:
        if _node_pool is None:
            _node_pool = _NodePool(NODE_POOL_SIZE)
        return _node_pool


# Background work that must not queue behind a stuck call (sync lease renewals): a thread
# per concurrent job, up to WORK_POOL_SIZE; WORK_POOL_LINGER of them stay when idle.
WORK_POOL_SIZE = 256
WORK_POOL_LINGER = 4
_work_pool: _NodePool | None = None


def run_soon(call: Callable[[], Any]) -> None:
    """Run `call` on a shared pool thread, at once: the pool grows while its threads are
    busy (a renewal waiting on a frozen server delays no other). Errors are the caller's
    to catch: they are dropped here."""
    global _work_pool
    with _node_pool_mutex:
        if _work_pool is None:
            _work_pool = _NodePool(WORK_POOL_SIZE, "seawall-worker", WORK_POOL_LINGER)
        pool = _work_pool
    pool.submit(lambda _: call(), None)


# Background jobs that may run as long as a user's function does (a cache refresh calls
# the loader): a pool of their own, so they never hold up a renewal, and with no bound, so
# they never queue behind each other. Threads are reused: Thread.start() waits for the new
# thread to run, which a caller in a crowd of runnable threads pays for dearly.
DETACHED_POOL_SIZE = 2**31
DETACHED_POOL_LINGER = 2
_detached_pool: _NodePool | None = None


def run_detached(call: Callable[[], Any]) -> None:
    """Run `call` on a pool thread, at once, without waiting for that thread to start (a
    new one only when none is idle). Errors are the caller's to catch: dropped here."""
    global _detached_pool
    with _node_pool_mutex:
        if _detached_pool is None:
            _detached_pool = _NodePool(
                DETACHED_POOL_SIZE, "seawall-background", DETACHED_POOL_LINGER
            )
        pool = _detached_pool
    pool.submit(lambda _: call(), None)


def _forget_node_pool() -> None:
    # The parent's threads (and connections' states) do not carry over into a forked child.
    global _node_pool, _node_pool_mutex, _work_pool, _detached_pool
    _node_pool, _node_pool_mutex, _work_pool = None, threading.Lock(), None
    _detached_pool = None
    _in_flight.clear()
    _answering.clear()
    _parked.clear()


os.register_at_fork(after_in_child=_forget_node_pool)


def _landed(key: int) -> None:
    with _node_pool_mutex:
        left = _in_flight.get(key, 1) - 1
        if left > 0:
            _in_flight[key] = left
        else:
            _in_flight.pop(key, None)


def each_node(clients: Sequence[Any], command: Sequence[Any], timeout: float) -> list[Any]:
    """Send `command` to every client's server at once; each reply, or the exception it
    raised (TimeoutError when no reply came within `timeout`).

    From the calling thread, with no thread hand-off, for masters that answered last
    time and have an idle pooled connection: the command goes out on one connection per
    master, then each reply is read with what is left of the timeout. Opening a
    connection to a frozen server blocks in its handshake, so the shared pool threads
    take the rest: a master with no idle connection, and a master not known to answer
    (first use, after an error or a timeout, whose connection is then parked with its
    reply still due). While a request to a master not known to answer is unanswered,
    that master is skipped: a frozen one ties up one pool thread, not the pool.
    """
    deadline = monotonic() + max(timeout, 0.0)
    results: list[Any] = [None] * len(clients)
    sent: list[tuple[int, Any, Any]] = []  # (index, pool, connection) awaiting a reply
    probes: list[int] = []  # masters not known to answer: one request at a time each
    helped: list[int] = []  # masters that answer but have no idle connection
    for index, client in enumerate(clients):
        if id(client) in _in_flight:
            results[index] = TimeoutError("an earlier request to this server is unanswered")
        elif not _drain_parked(client) or client not in _answering:
            probes.append(index)
        elif not _idle_connection(client.connection_pool):
            helped.append(index)
        else:
            outcome = _send_pooled(client, command)
            if isinstance(outcome, Exception):
                results[index] = outcome
            else:
                sent.append((index, *outcome))
    # Started before the replies below are read, so all of them wait at the same time.
    on_threads = probes + helped
    if on_threads:
        late = _each_node_on_threads(
            [clients[i] for i in on_threads], command, deadline, exclusive=len(probes)
        )
    for index, pool, connection in sent:
        results[index] = _read_reply(clients[index], pool, connection, deadline, timeout)
    if on_threads:
        for index, result in zip(on_threads, late(), strict=True):
            results[index] = result
    return results


def one_node(client: Any, command: Sequence[Any], timeout: float) -> Any:
    """Send `command` to one client's server; its reply, or the exception it raised
    (TimeoutError when no reply came within `timeout`).

    As `each_node` does for each master, without its one-request-at-a-time rule for a
    server not known to answer (a caller here has no quorum to fall back on): from the
    calling thread on an idle pooled connection of a server that answered last time, else
    on the shared pool threads. A reply still due at the deadline is never read by anyone
    else: its connection is parked, or its call goes on on a pool thread.
    """
    deadline = monotonic() + max(timeout, 0.0)
    pool = getattr(client, "connection_pool", None)
    if (
        pool is not None
        and client in _answering
        and _drain_parked(client)
        and _idle_connection(pool)
    ):
        outcome = _send_pooled(client, command)
        if isinstance(outcome, Exception):
            return outcome
        return _read_reply(client, *outcome, deadline, timeout)
    # A server that left a call unanswered gets one request at a time on the threads (as
    # in each_node): against a frozen server without socket_timeout, retries (renewals
    # every ttl/10) then tie up one thread, not one each. A client not used yet is not
    # held to this: its first callers all go ahead.
    silent = client in _silent
    if silent and id(client) in _in_flight:
        return TimeoutError("an earlier request to this server is unanswered")
    return _each_node_on_threads([client], command, deadline, exclusive=int(silent))()[0]


def one_node_on_threads(client: Any, command: Sequence[Any], timeout: float) -> Any:
    """As `one_node`, always on a pool thread (for clients without a connection pool of
    their own, such as a cluster client following a redirection)."""
    deadline = monotonic() + max(timeout, 0.0)
    return _each_node_on_threads([client], command, deadline, exclusive=0)()[0]


def _send_pooled(client: Any, command: Sequence[Any]) -> tuple[Any, Any] | Exception:
    """Send `command` on an idle pooled connection: (pool, connection), or the error."""
    pool = client.connection_pool
    try:
        connection = pooled_connection(pool)
    except Exception as exc:
        _answering.discard(client)
        return exc
    try:
        connection.send_command(*command)
    except BaseException as exc:
        connection.disconnect()
        pool.release(connection)
        _answering.discard(client)
        if not isinstance(exc, Exception):
            raise
        return exc
    return pool, connection


# Clients whose last request was answered in time: they use the fast path.
_answering: weakref.WeakSet[Any] = weakref.WeakSet()
# Clients with a request that went unanswered in time, until one is answered (one_node).
_silent: weakref.WeakSet[Any] = weakref.WeakSet()
# Connections left with a reply due, per client: (pool, connection).
_parked: weakref.WeakKeyDictionary[Any, list[tuple[Any, Any]]] = weakref.WeakKeyDictionary()


def _idle_connection(pool: Any) -> bool:
    """Whether `pool` has an open connection to lend, so getting one opens none (opening a
    connection to a frozen server blocks in its handshake). Pools of unknown make
    (BlockingConnectionPool) answer no, and their clients always use the pool threads.
    Another thread may take that connection first; the window is a few instructions."""
    idle = getattr(pool, "_available_connections", None)
    return isinstance(idle, list) and bool(idle)


def pooled_connection(pool: Any) -> Any:
    """A connection of a sync client's `pool`, on every redis-py from 5.0."""
    try:
        return pool.get_connection()
    except TypeError:  # redis-py before 5.3 wants a command name
        return pool.get_connection("EVALSHA")


def _drain_parked(client: Any) -> bool:
    """True when `client` has no reply due (late ones that have arrived are read now)."""
    with _node_pool_mutex:
        parked = _parked.pop(client, [])
    waiting = []
    for pool, connection in parked:
        try:
            if not connection.can_read(timeout=0):
                waiting.append((pool, connection))
                continue
            with contextlib.suppress(ResponseError):
                connection.read_response()
        except Exception:
            connection.disconnect()
        pool.release(connection)
    if waiting:
        _park(client, waiting)
    return not waiting


def _park(client: Any, connections: list[tuple[Any, Any]]) -> None:
    with _node_pool_mutex:
        _parked.setdefault(client, []).extend(connections)


def _read_reply(client: Any, pool: Any, connection: Any, deadline: float, timeout: float) -> Any:
    try:
        # can_read(0) still returns a reply that has already arrived, even past the deadline.
        if not connection.can_read(timeout=max(deadline - monotonic(), 0.0)):
            _park(client, [(pool, connection)])
            _answering.discard(client)
            _silent.add(client)
            return TimeoutError(f"no answer within {timeout:g} s")
        reply = connection.read_response()
    except ResponseError as exc:  # an error reply: the connection itself is fine
        pool.release(connection)
        return exc
    except BaseException as exc:
        connection.disconnect()
        pool.release(connection)
        _answering.discard(client)
        if not isinstance(exc, Exception):
            raise
        return exc
    pool.release(connection)
    return reply


def _each_node_on_threads(
    clients: Sequence[Any], command: Sequence[Any], deadline: float, exclusive: int
) -> Callable[[], list[Any]]:
    """Start `command` on the pool threads; the returned function collects the replies.

    The first `exclusive` clients are marked in flight until they answer (see _in_flight).
    """
    pool = _get_node_pool()

    def call(client: Any) -> Any:
        reply = client.execute_command(*command)
        _answering.add(client)
        _silent.discard(client)
        return reply

    futures = []
    for position, client in enumerate(clients):
        future = pool.submit(call, client)
        if position < exclusive:
            key = id(client)
            with _node_pool_mutex:
                _in_flight[key] = _in_flight.get(key, 0) + 1
            future.add_done_callback(lambda _, key=key: _landed(key))  # type: ignore[misc]
        futures.append(future)

    def collect() -> list[Any]:
        concurrent.futures.wait(futures, timeout=max(deadline - monotonic(), 0.0))
        results: list[Any] = []
        for client, future in zip(clients, futures, strict=True):
            if future.done():
                results.append(future.exception() or future.result())
                continue
            if not future.cancel():
                # Started and blocked (a frozen server, a client without socket_timeout):
                # it cannot be interrupted; let another thread take its place meanwhile.
                pool.stuck(+1)
                future.add_done_callback(lambda _: pool.stuck(-1))
            _answering.discard(client)
            _silent.add(client)
            results.append(TimeoutError("no answer in time"))
        return results

    return collect
