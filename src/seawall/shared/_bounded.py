"""Redis calls bounded by a deadline, whatever the client's socket timeout.

A caller's timeout (`acquire(timeout=1.0)`, a cache's wait_timeout, Idempotent's timeout)
and a lease's renewal must end on time even when the server is frozen and the client has
no socket_timeout (a blocked read that would never end) or a long one. Both faces bound
every Redis call made inside `async with async_until(deadline)` / `with until(deadline)`:

- asyncio: `asyncio.timeout` around the block; redis-py drops a connection whose reply a
  cancellation cut off, so no later command reads a stale reply.
- sync: a thread cannot be interrupted, so `execute` does not block on the socket: the
  command goes out on an idle pooled connection and its reply is read with what is left
  of the deadline (seawall.shared._fanout, shared with Redlock's rounds); a reply still due is
  left to a parked connection or a pool thread, never read by another command. On Redis
  Cluster the command goes to the node of its key (`_concurrency.node_of`); a redirection
  (a slot moving) is followed by the cluster client itself, on a pool thread.

Both raise the builtin TimeoutError at the deadline. The command may still run on the
server after that: callers that asked for something (a lock's token) give it back.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any, TypeVar

import redis.cluster
from redis.exceptions import AskError, ClusterDownError, MovedError, TryAgainError

from seawall.shared import _concurrency, _direct, _fanout

_REDIRECTED = (MovedError, AskError, TryAgainError, ClusterDownError)


class _Deadline(threading.local):
    # A class default, not getattr(..., None): a missing thread-local attribute costs a
    # raised and caught AttributeError (about 0.4 us) on every Redis call of a sync
    # primitive, most of seawall's own time on a Stock.take.
    deadline: float | None = None


_local = _Deadline()

T = TypeVar("T")


# Deadlines further off than this are no bound at all (the sync call blocks as usual).
FAR = 86_400.0

# A call made at (or just before) a caller's deadline, its last look, may take this long.
LAST_LOOK = 0.25


def last_look(deadline: float | None) -> float | None:
    """The bound of a call made under `deadline`: that deadline, but never less than
    LAST_LOOK from now, so the look a waiter takes when its time is up can still answer."""
    if deadline is None:
        return None
    return max(deadline, _concurrency.monotonic() + LAST_LOOK)


# What both faces return for no deadline: no bound adds nothing to an enclosing one.
_NO_BOUND = contextlib.nullcontext()


def async_until(deadline: float | None) -> Any:
    """Bound every await in the block by `deadline` (monotonic; None: no bound)."""
    if deadline is None:
        return _NO_BOUND
    return asyncio.timeout(max(deadline - _concurrency.monotonic(), 0.0))


def until(deadline: float | None) -> contextlib.AbstractContextManager[None]:
    """Bound every `execute` of this thread in the block by `deadline` (nested: the
    earlier deadline wins)."""
    return _NO_BOUND if deadline is None else _bounded_by(deadline)


@contextlib.contextmanager
def _bounded_by(deadline: float) -> Iterator[None]:
    outer = _local.deadline
    _local.deadline = deadline if outer is None or deadline < outer else outer
    try:
        yield
    finally:
        _local.deadline = outer


def current_deadline() -> float | None:
    """The deadline `until` set for this thread, if any."""
    return _local.deadline


async def async_execute(client: Any, command: Sequence[Any], key: str) -> Any:
    """Run `command` (about `key`); bounded by the enclosing `async_until`."""
    return await _direct.async_run(client, command)


def execute(client: Any, command: Sequence[Any], key: str) -> Any:
    """Run `command` (about `key`); bounded by the enclosing `until`, if any."""
    deadline = _local.deadline  # current_deadline(), inline: this runs on every call
    if deadline is None or deadline - _concurrency.monotonic() > FAR:
        # (A deadline this far off, threading.TIMEOUT_MAX, bounds nothing a socket wait
        # could take, and is beyond what poll() accepts.)
        return _direct.run(client, command)
    timeout = deadline - _concurrency.monotonic()
    if timeout <= 0:
        raise TimeoutError("no time left for a Redis call")
    if isinstance(client, redis.cluster.RedisCluster):
        node = client.get_redis_connection(_concurrency.node_of(client, key))
        reply = _fanout.one_node(node, command, timeout)
        if isinstance(reply, _REDIRECTED):
            reply = _fanout.one_node_on_threads(
                client, command, max(deadline - _concurrency.monotonic(), 0.0)
            )
    else:
        reply = _fanout.one_node(client, command, timeout)
    if isinstance(reply, _direct.REDIRECTS):
        raise _direct.wrong_client(client, reply) from reply
    if isinstance(reply, BaseException):
        raise reply
    return reply


async def async_within(call: Callable[[], Awaitable[T]]) -> T:
    """Await `call()` (several commands on one connection, such as a pipeline); bounded by
    the enclosing `async_until`."""
    return await call()


def within(call: Callable[[], T]) -> T:
    """Run `call()` (several commands on one connection, such as a pipeline), bounded by
    the enclosing `until`, if any: on a pool thread, which a frozen server may keep after
    the deadline (the pool lets another thread start in its place meanwhile)."""
    deadline = current_deadline()
    timeout = None if deadline is None else deadline - _concurrency.monotonic()
    if timeout is None or timeout > FAR:
        return call()
    if timeout <= 0:
        raise TimeoutError("no time left for a Redis call")
    pool = _fanout._get_node_pool()
    future = pool.submit(lambda _: call(), None)
    try:
        return future.result(timeout=timeout)
    except concurrent.futures.TimeoutError:
        if not future.cancel():
            pool.stuck(+1)
            future.add_done_callback(lambda _: pool.stuck(-1))
        raise TimeoutError(f"no answer within {timeout:g} s") from None


def async_time_limit(seconds: float) -> Any:
    """Bound an await: a frozen server must not stall lease renewal past the lease."""
    return asyncio.timeout(max(seconds, 0.0))


def time_limit(seconds: float) -> Any:
    # Sync Redis calls made through execute (every script) read their reply with what is
    # left of this limit, whatever the client's socket_timeout.
    return until(_concurrency.monotonic() + max(seconds, 0.0))
