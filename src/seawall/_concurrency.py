"""What genuinely differs between sync and asyncio code, in one place.

The implementations in `seawall/_async/` use the `Async*` / `async_*` names below;
`scripts/unasync.py` rewrites them to the plain names to produce `seawall/_sync/`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import queue
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

log = logging.getLogger("seawall")
# A library leaves output to the application: lost leases are reported through on_lost and
# LockNotOwnedError; the log records are there for whoever configures logging.
log.addHandler(logging.NullHandler())

T = TypeVar("T")

# Monotonic clock used for every lease and timeout; tests may replace it.
monotonic = time.monotonic


class AsyncEvent:
    def __init__(self) -> None:
        self._event = asyncio.Event()

    def set(self) -> None:
        self._event.set()

    def clear(self) -> None:
        self._event.clear()

    def is_set(self) -> bool:
        return self._event.is_set()

    async def wait(self, timeout: float | None) -> bool:
        if self._event.is_set():
            return True
        try:
            async with asyncio.timeout(timeout):
                await self._event.wait()
        except TimeoutError:
            return False
        return True


class Event:
    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        self._event.set()

    def clear(self) -> None:
        self._event.clear()

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None) -> bool:
        return self._event.wait(timeout)


async def async_sleep(seconds: float) -> None:
    await asyncio.sleep(seconds)


def sleep(seconds: float) -> None:
    time.sleep(seconds)


class AsyncWorker:
    """A background loop: an asyncio task here, a daemon thread in the sync twin."""

    def __init__(self, target: Callable[[], Coroutine[Any, Any, None]], name: str) -> None:
        self._task: asyncio.Task[None] = asyncio.get_running_loop().create_task(
            target(), name=name
        )

    def alive(self) -> bool:
        return not self._task.done()


class Worker:
    def __init__(self, target: Callable[[], None], name: str) -> None:
        self._thread = threading.Thread(target=target, name=name, daemon=True)
        self._thread.start()

    def alive(self) -> bool:
        return self._thread.is_alive()


def async_background(call: Callable[[], Awaitable[Any]], what: str) -> None:
    """Finish `call` even if the caller is being cancelled (cleanup after a cancelled acquire)."""

    async def run() -> None:
        try:
            await call()
        except Exception as exc:  # best effort: the lease still bounds the damage
            log.warning("seawall: %s failed: %r", what, exc)

    task = asyncio.get_running_loop().create_task(run())
    _background.add(task)
    task.add_done_callback(_background.discard)


def background(call: Callable[[], Any], what: str) -> None:
    try:
        call()
    except Exception as exc:
        log.warning("seawall: %s failed: %r", what, exc)


_background: set[asyncio.Task[None]] = set()


def async_owner() -> object:
    """Who holds a lock in this world: the current asyncio task."""
    task = asyncio.current_task()
    if task is None:
        raise RuntimeError("seawall.aio locks must be used from inside an asyncio task")
    return task


def owner() -> object:
    """Who holds a lock in this world: the current thread."""
    return threading.current_thread()


class _ProcessScope:
    """Stands for "this process" as a registry key; replaced in a forked child."""


_process_scope = _ProcessScope()


def _after_fork() -> None:
    # Threads do not survive fork: a renewer or waker of the parent must not be reused.
    global _process_scope
    _process_scope = _ProcessScope()


os.register_at_fork(after_in_child=_after_fork)


def async_scope() -> object:
    """Per-event-loop registries: asyncio objects belong to one loop."""
    return asyncio.get_running_loop()


def scope() -> object:
    return _process_scope


class ScopedRegistry:
    """One object per (scope, key): a renewer per loop or process, a waker per client.

    Both levels hold weak references, so a closed loop or a dropped client takes its
    entries with it; values must not hold strong references back to their key.
    """

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._by_scope: weakref.WeakKeyDictionary[object, weakref.WeakKeyDictionary[Any, Any]] = (
            weakref.WeakKeyDictionary()
        )

    def get(self, scope_key: object, key: object, make: Callable[[], T]) -> T:
        with self._mutex:
            per_scope = self._by_scope.get(scope_key)
            if per_scope is None:
                per_scope = self._by_scope[scope_key] = weakref.WeakKeyDictionary()
            found = per_scope.get(key)
            if found is None:
                found = per_scope[key] = make()
            return found


def async_time_limit(seconds: float) -> Any:
    """Bound an await: a frozen server must not stall lease renewal past the lease."""
    return asyncio.timeout(max(seconds, 0.0))


def time_limit(seconds: float) -> Any:
    # Sync I/O is bounded by the client's socket_timeout; nothing to add here.
    return contextlib.nullcontext()


def async_fire(callback: Callable[[Any], Any], arg: Any) -> None:
    """Call a user callback; a coroutine it returns runs as a task. Errors are logged."""
    try:
        result = callback(arg)
        if asyncio.iscoroutine(result):
            task = asyncio.get_running_loop().create_task(result)
            _background.add(task)
            task.add_done_callback(_background.discard)
    except Exception:
        log.exception("seawall: callback %r raised", callback)


def fire(callback: Callable[[Any], Any], arg: Any) -> None:
    try:
        callback(arg)
    except Exception:
        log.exception("seawall: callback %r raised", callback)


# --- Redlock: one request to each of several masters at once ------------------------------

N = TypeVar("N")

# Sync Redlock requests run on this many shared daemon threads at most (per process): never
# a pool per acquire, and daemon threads so that a call stuck on a frozen master cannot
# hold up interpreter exit.
NODE_POOL_SIZE = 16
NODE_POOL_IDLE_EXIT = 5.0


def _retrieve(task: asyncio.Task[Any]) -> None:
    # A call cancelled at its timeout may still end in an error; retrieve it so asyncio
    # does not report it as never retrieved.
    if not task.cancelled():
        task.exception()


async def async_each_node(
    nodes: Sequence[N], call: Callable[[N], Awaitable[T]], timeout: float
) -> list[T | BaseException]:
    """`call(node)` for every node at once; each result or the exception it raised.

    A call without an answer after `timeout` seconds is cancelled and reported as
    TimeoutError.
    """
    tasks = [asyncio.ensure_future(call(node)) for node in nodes]
    try:
        await asyncio.wait(tasks, timeout=max(timeout, 0.0))
    finally:
        late = [task for task in tasks if not task.done()]
        for task in late:
            task.cancel()
            task.add_done_callback(_retrieve)
    results: list[T | BaseException] = []
    for task in tasks:
        if task in late or task.cancelled():
            results.append(TimeoutError(f"no answer within {timeout:g} s"))
        else:
            results.append(task.exception() or task.result())
    return results


class _NodePool:
    """A few daemon threads, started on demand, shared by every sync Redlock.

    A call stuck past its timeout (a frozen server, a client without socket_timeout)
    cannot be interrupted; `stuck(+1)` lets one more thread start in its place, so stuck
    calls never starve the others, and `stuck(-1)` takes the allowance back once it ends.
    """

    def __init__(self, size: int) -> None:
        self._size = size
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
        threading.Thread(target=self._run, name="seawall-redlock", daemon=True).start()

    def _run(self) -> None:
        while True:
            try:
                future, call, node = self._work.get(timeout=NODE_POOL_IDLE_EXIT)
            except queue.Empty:
                # Threads started for stuck calls leave once those calls have ended; the
                # idle token taken here is this thread's own, so no submit counts on it.
                with self._mutex:
                    if self._threads > self._size and self._idle.acquire(blocking=False):
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
# Calls still running past their timeout, per node (by id: a stuck call keeps its node
# alive). A node with one is skipped until it answers, so a frozen master without a
# socket_timeout ties up at most one pool thread per client instead of all of them.
_stuck: dict[int, int] = {}


def _get_node_pool() -> _NodePool:
    global _node_pool
    with _node_pool_mutex:
        if _node_pool is None:
            _node_pool = _NodePool(NODE_POOL_SIZE)
        return _node_pool


def _forget_node_pool() -> None:
    # The parent's threads do not exist in a forked child.
    global _node_pool, _node_pool_mutex
    _node_pool, _node_pool_mutex = None, threading.Lock()
    _stuck.clear()


os.register_at_fork(after_in_child=_forget_node_pool)


def _unstick(pool: _NodePool, key: int) -> None:
    with _node_pool_mutex:
        left = _stuck.get(key, 1) - 1
        if left > 0:
            _stuck[key] = left
        else:
            _stuck.pop(key, None)
    pool.stuck(-1)


def each_node(
    nodes: Sequence[N], call: Callable[[N], T], timeout: float
) -> list[T | BaseException]:
    pool = _get_node_pool()
    futures: list[Future[T] | None] = []
    for node in nodes:
        futures.append(None if id(node) in _stuck else pool.submit(call, node))
    running = [future for future in futures if future is not None]
    if running:
        concurrent.futures.wait(running, timeout=max(timeout, 0.0))
    results: list[T | BaseException] = []
    for node, future in zip(nodes, futures, strict=True):
        if future is None:
            results.append(TimeoutError("an earlier request to this server is still unanswered"))
        elif future.done():
            results.append(future.exception() or future.result())
        else:
            if not future.cancel():
                # Started and blocked (a frozen server, a client without socket_timeout):
                # it cannot be interrupted, so skip this node until it comes back.
                key = id(node)
                with _node_pool_mutex:
                    _stuck[key] = _stuck.get(key, 0) + 1
                pool.stuck(+1)
                future.add_done_callback(lambda _, key=key: _unstick(pool, key))  # type: ignore[misc]
            results.append(TimeoutError(f"no answer within {timeout:g} s"))
    return results
