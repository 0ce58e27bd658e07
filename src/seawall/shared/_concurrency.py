"""What genuinely differs between sync and asyncio code, in one place.

The implementations in each family's `_async/` use the `Async*` / `async_*` names below;
`scripts/unasync.py` rewrites them to the plain names to produce its `_sync/`.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import contextlib
import functools
import inspect
import logging
import os
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from redis.exceptions import RedisClusterException, RedisError

from seawall.shared._async_event import AsyncEvent as AsyncEvent  # re-exported
from seawall.shared._fanout import retrieve_outcome

log = logging.getLogger("seawall")
# A library leaves output to the application: lost leases are reported through on_lost and
# LockNotOwnedError; the log records are there for whoever configures logging.
log.addHandler(logging.NullHandler())

T = TypeVar("T")

# Monotonic clock used for every lease and timeout; tests may replace it.
monotonic = time.monotonic


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
        self._task: asyncio.Task[None] = asyncio.get_running_loop().create_task(target(), name=name)

    def alive(self) -> bool:
        return not self._task.done()


class Worker:
    def __init__(self, target: Callable[[], None], name: str) -> None:
        self._thread = threading.Thread(target=_until_exit, args=(target,), name=name, daemon=True)
        _worker_threads.add(self._thread)
        self._thread.start()

    def alive(self) -> bool:
        return self._thread.is_alive()


class WorkerExit(BaseException):
    """Ends a background thread of seawall's when the interpreter exits (see _stop_workers)."""


# Set when the interpreter begins to exit. From then on seawall's background threads stop
# where they would reconnect or go on (raise_if_cancelled raises WorkerExit there). Daemon
# threads are frozen wherever they stand once the interpreter finalizes; one frozen inside
# a redis-py connection pool's lock (releasing or opening a connection) would hang the main
# thread for ever at its last clean-up of that pool (a client's __del__ closes it).
_exiting = threading.Event()
_worker_threads: weakref.WeakSet[threading.Thread] = weakref.WeakSet()
# At exit, how long in all the background threads get to stop. Those running Python (the
# ones that could be frozen inside a pool's lock) finish their step within microseconds;
# those blocked in a read or a wait hold no lock and are not waited for any longer.
STOP_WAIT = 0.05


def _until_exit(target: Callable[[], None]) -> None:
    with contextlib.suppress(WorkerExit):
        target()


@atexit.register
def _stop_workers() -> None:
    """At exit (after the application's own atexit calls, registered later): ask the
    background threads to stop and give them a moment, so none is frozen mid-way through a
    connection pool. Threads blocked in a read or a wait hold no pool lock and may stay."""
    _exiting.set()
    deadline = time.monotonic() + STOP_WAIT
    for thread in list(_worker_threads):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        if thread is not threading.current_thread():
            thread.join(left)


def _failed(what: str, exc: Exception, cleanup: bool) -> None:
    """Log a background call's failure. A cleanup after a caller's failure (giving back
    what a failed or cancelled acquire may hold) that fails because Redis is unreachable
    is DEBUG: the caller's own exception reports that outage, and the lease bounds it."""
    if cleanup and isinstance(exc, RedisError | RedisClusterException | OSError | TimeoutError):
        log.debug("%s failed: %r", what, exc)
    else:
        log.warning("%s failed: %r", what, exc)


def async_background(
    call: Callable[[], Awaitable[Any]], what: str, *, cleanup: bool = True
) -> None:
    """Finish `call` even if the caller is being cancelled (cleanup after a cancelled acquire)."""

    async def run() -> None:
        try:
            await call()
        except Exception as exc:  # best effort: the lease still bounds the damage
            _failed(what, exc, cleanup)

    task = asyncio.get_running_loop().create_task(run())
    _background.add(task)
    task.add_done_callback(_background.discard)


def background(call: Callable[[], Any], what: str, *, cleanup: bool = True) -> None:
    try:
        call()
    except Exception as exc:
        _failed(what, exc, cleanup)


_background: set[asyncio.Task[None]] = set()


def async_owner() -> object:
    """Who holds a lock in this world: the current asyncio task."""
    task = asyncio.current_task()
    if task is None:
        raise RuntimeError("seawall.aio locks must be used from inside an asyncio task")
    return task


# threading's own table of the threads it knows, by id (CPython's; unchanged since 2.x).
_THREADS: dict[int, threading.Thread] = threading._active  # type: ignore[attr-defined]


def owner() -> object:
    """Who holds a lock in this world: the current thread."""
    # Looked up, not threading.current_thread(): for a thread threading did not start,
    # that makes a dummy Thread that stays in threading.enumerate() for ever (one leaked
    # per such thread that ever took a lock).
    thread = _THREADS.get(threading.get_ident())
    if thread is None or isinstance(thread, threading._DummyThread):
        return _foreign_thread()
    return thread


class _ThreadMark:
    """Lives in a thread's locals, so it is freed when that thread's state is."""

    __slots__ = ("__weakref__",)


class ForeignThread:
    """The owner that stands for a thread `threading` did not start (a C extension's, or
    `_thread.start_new_thread`'s). threading knows such a thread only as a dummy that never
    ends and that a later thread given the same id turns into: as an owner, its holds
    would never pass on, and that later thread would inherit them. This owner ends with
    the thread's locals instead, and each thread gets its own."""

    __slots__ = ("__weakref__", "_mark", "name")

    def __init__(self, mark: _ThreadMark, name: str) -> None:
        self._mark = weakref.ref(mark)
        self.name = name

    def is_alive(self) -> bool:
        return self._mark() is not None

    def __repr__(self) -> str:
        return f"<foreign thread {self.name} {'alive' if self.is_alive() else 'ended'}>"


_foreign = threading.local()


def _foreign_thread() -> ForeignThread:
    found: ForeignThread | None = getattr(_foreign, "owner", None)
    if found is None:
        mark = _foreign.mark = _ThreadMark()
        name = f"foreign-{threading.get_ident()}"
        found = _foreign.owner = ForeignThread(mark, name)
    return found


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


def async_fire(callback: Callable[[Any], Any], arg: Any) -> None:
    """Call a user callback; a coroutine it returns runs as a task. Errors are logged."""
    try:
        result = callback(arg)
        if asyncio.iscoroutine(result):
            task = asyncio.get_running_loop().create_task(result)
            _background.add(task)
            task.add_done_callback(_background.discard)
    except Exception:
        log.exception("callback %r raised", callback)


def fire(callback: Callable[[Any], Any], arg: Any) -> None:
    try:
        callback(arg)
    except Exception:
        log.exception("callback %r raised", callback)


async def async_node_of(cluster: Any, key: str) -> Any:
    """The node of a Redis Cluster client that serves `key` (asyncio clients load their slot
    map on first use, so it is loaded here first)."""
    await cluster.initialize()
    return cluster.get_node_from_key(key)


def node_of(cluster: Any, key: str) -> Any:
    # Sync cluster clients load their slot map when constructed.
    return cluster.get_node_from_key(key)


def async_run_soon(call: Callable[[], Awaitable[Any]], what: str) -> None:
    """Start `call` alongside the caller, which does not wait for it; errors are logged.

    A task here; in sync code a thread of a shared pool that grows while its threads are
    busy, so one call stuck on a frozen server never delays another."""
    async_background(call, what, cleanup=False)


def run_soon(call: Callable[[], Any], what: str) -> None:
    from seawall.shared._fanout import run_soon as on_pool

    on_pool(functools.partial(background, call, what, cleanup=False))


def async_detach(call: Callable[[], Awaitable[Any]], what: str) -> None:
    """Run `call` in the background, outliving the caller, which does not wait for it to
    start: a task here; in sync code a reused daemon thread of a pool with no bound
    (Thread.start() waits for the new thread to run: among many runnable threads, that
    is the caller's own wait for its turn, twice). Errors are logged."""
    async_background(call, what, cleanup=False)


def detach(call: Callable[[], Any], what: str) -> None:
    from seawall.shared._fanout import run_detached

    run_detached(functools.partial(background, call, what, cleanup=False))


def async_spawn(call: Callable[[], Awaitable[Any]], what: str, *, cleanup: bool = False) -> None:
    """Run `call` in the background (a task), outliving the caller; errors are logged
    (see _failed for `cleanup`)."""
    async_background(call, what, cleanup=cleanup)


def spawn(call: Callable[[], Any], what: str, *, cleanup: bool = False) -> None:
    """Run `call` in the background (a daemon thread), outliving the caller."""
    threading.Thread(
        target=background, args=(call, what), kwargs={"cleanup": cleanup}, name=what, daemon=True
    ).start()


async def async_call_loader(loader: Callable[[], Any]) -> Any:
    """Call a user's loader; one returning an awaitable (an async function) is awaited."""
    result = loader()
    if inspect.isawaitable(result):
        result = await result
    return result


def call_loader(loader: Callable[[], Any]) -> Any:
    result = loader()
    if inspect.isawaitable(result):
        if asyncio.iscoroutine(result):
            result.close()  # never awaited: close it so Python does not warn about it
        raise TypeError(
            f"loader {loader!r} returned an awaitable: seawall.Cache calls loaders "
            "synchronously; use seawall.aio.Cache for async loaders"
        )
    return result


def async_membership(container: Any, item: Any) -> bool:
    """`item in container` cannot await: asyncio objects say what to write instead."""
    raise TypeError(
        f"`in` cannot wait for Redis on a seawall.aio object: use "
        f"`await {type(container).__name__.removeprefix('Async').lower()}.might_contain(item)`"
    )


def membership(container: Any, item: Any) -> bool:
    return bool(container.might_contain(item))


# --- Redlock: one request to every master at once ---------------------------------------
# The implementations (a task per master in asyncio; the calling thread's fan-out and the
# shared pool in sync code) are in seawall/shared/_fanout.py; these are their paired names.
from seawall.shared._fanout import async_each_node as async_each_node  # noqa: E402
from seawall.shared._fanout import each_node as each_node  # noqa: E402


async def async_offload(call: Callable[..., T], *args: Any) -> T:
    """Run a blocking call (a database transaction) without blocking the event loop."""
    return await asyncio.to_thread(call, *args)


def offload(call: Callable[..., T], *args: Any) -> T:
    return call(*args)


async def async_resolve(value: Any) -> Any:
    """The value a user callback returned; awaited when it is a coroutine or awaitable."""
    if inspect.isawaitable(value):
        return await value
    return value


def resolve(value: Any) -> Any:
    if inspect.isawaitable(value):
        if asyncio.iscoroutine(value):
            value.close()  # never awaited: its body did not run
        raise TypeError(
            "the handler returned an awaitable: seawall.Idempotent calls handlers "
            "synchronously; use seawall.aio.Idempotent for async handlers"
        )
    return value


def async_check_cached_function(function: Any, what: str) -> None:
    """seawall.aio's @cached() needs an async function: a plain one would be awaited."""
    if not callable(function):
        raise TypeError(f"{what}: @cached() decorates a function, got {function!r}")
    if not inspect.iscoroutinefunction(function):
        raise TypeError(
            f"{what}: {getattr(function, '__qualname__', function)!r} is not an async function; "
            "seawall.aio.Cache.cached() decorates `async def` functions: make it async, or "
            "use seawall.Cache (sync) for it"
        )


def check_cached_function(function: Any, what: str) -> None:
    if not callable(function):
        raise TypeError(f"{what}: @cached() decorates a function, got {function!r}")
    if inspect.iscoroutinefunction(function):
        raise TypeError(
            f"{what}: {getattr(function, '__qualname__', function)!r} is an async function; "
            "seawall.Cache calls functions synchronously: use seawall.aio.Cache.cached() for it"
        )


def async_check_handler(handler: Any, what: str) -> None:
    """A handler that cannot be called here is refused before anything runs."""
    if not callable(handler):
        raise TypeError(f"{what}: the handler must be callable, got {handler!r}")


def check_handler(handler: Any, what: str) -> None:
    async_check_handler(handler, what)
    call = getattr(handler, "__call__", None)  # noqa: B004 - an object with async __call__
    if inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(call):
        raise TypeError(
            f"{what}: handler {handler!r} is an async function; seawall.Idempotent calls "
            "handlers synchronously: use seawall.aio.Idempotent (await guard.run(...)) for it"
        )


class AsyncSlots:
    """At most `count` holders at once among the tasks of one event loop; waits bounded.

    Every cache read takes a slot when the client's pool is bounded (redis-py's default
    pool is), so a free one is taken by `take_now`, a plain call: through
    asyncio.Semaphore it was three coroutines per read. One loop's tasks share it, so the
    count needs no lock.
    """

    def __init__(self, count: int) -> None:
        self._free = count
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    def take_now(self) -> bool:
        """Take a free slot if there is one (and nobody queued before us)."""
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return True
        return False

    async def acquire(self, timeout: float) -> bool:
        if self.take_now():
            return True
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout(timeout):
                await waiter
        except TimeoutError:
            pass
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.release()  # handed to us as we were cancelled: pass it on
            raise
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
        # A slot handed over as the timeout fired is ours all the same.
        return waiter.done() and not waiter.cancelled()

    def release(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot passes to the first waiter
                return
        self._free += 1


class Slots:
    """At most `count` holders at once among the threads of a process; waits bounded.

    A free slot is taken under a plain lock, one C call each way: threading's Semaphore,
    Python around a Condition, cost every cache read about 1.3 us. The Condition is used
    only when callers must wait.
    """

    def __init__(self, count: int) -> None:
        self._count = count
        self._free = count
        self._waiting = 0
        self._mutex = threading.Lock()
        self._freed = threading.Condition(self._mutex)

    def take_now(self) -> bool:
        """Take a free slot if there is one."""
        with self._mutex:
            if self._free > 0:
                self._free -= 1
                return True
            return False

    def acquire(self, timeout: float) -> bool:
        with self._mutex:
            if self._free == 0:
                self._waiting += 1
                try:
                    if not self._freed.wait_for(lambda: self._free > 0, timeout):
                        return False
                finally:
                    self._waiting -= 1
            self._free -= 1
            return True

    def release(self) -> None:
        with self._mutex:
            if self._free >= self._count:
                raise ValueError("connection slot released more often than taken")
            self._free += 1
            if self._waiting:
                self._freed.notify()


def async_raise_if_cancelled() -> None:
    """Raise CancelledError if the current task was asked to stop. Call it where errors
    are caught and retried: some redis-py paths turn a cancellation into another error."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


def raise_if_cancelled() -> None:
    """Threads cannot be cancelled; at interpreter exit a background thread is stopped here
    (WorkerExit, see _stop_workers), as a cancelled task is in asyncio."""
    if _exiting.is_set():
        raise WorkerExit


def async_stop_if_cancelled() -> None:
    """Before a caller's task waits or calls a loader: raise CancelledError if it was asked
    to stop, in case redis-py's read swallowed that (see async_raise_if_cancelled)."""
    async_raise_if_cancelled()


def stop_if_cancelled() -> None:
    """The sync twin: a caller's thread cannot be cancelled, so nothing to do."""


async def async_giving_back(
    call: Awaitable[T], give_back: Callable[[], Awaitable[Any]], what: str
) -> T:
    """`await call`, a script that may take something on the server for the caller (a load
    lease, a claim). Cancelled mid-flight, the caller never learns whether it got it, so
    `give_back()` runs in the background (it must be a no-op where nothing was taken), or
    the others wait until it expires."""
    try:
        return await call
    except asyncio.CancelledError:
        async_spawn(give_back, what, cleanup=True)
        raise


def giving_back(call: T, give_back: Callable[[], Any], what: str) -> T:
    """The sync twin: `call` is the script's answer already; a thread cannot be cancelled."""
    return call


async def async_in_own_task(call: Callable[[], Awaitable[T]]) -> T:
    """Await `call()` in a task of its own, so that cancelling the caller ends the caller
    at once. For a blocking command (BLPOP): redis-py's read may swallow a cancellation,
    and the command would then hold the caller until its own timeout. Cancelled, the
    caller asks the call to stop too; if it does not, it ends by that timeout unseen."""
    task = asyncio.ensure_future(call())
    try:
        return await asyncio.shield(task)
    except BaseException:
        if not task.done():
            task.cancel()
            task.add_done_callback(retrieve_outcome)
        raise


def in_own_task(call: Callable[[], T]) -> T:
    """The sync twin: a thread cannot be cancelled; the call runs here."""
    return call()
