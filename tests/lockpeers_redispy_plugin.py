"""pytest plugin that runs redis-py's own lock tests on seawall's locks.

Loaded by lockpeers.py (`-p lockpeers_redispy_plugin`) into a pytest run of the
tests/test_lock.py and tests/test_asyncio/test_lock.py of redis-py's sdist, with redis-py's
own conftest and fixtures (`r`, `create_redis`, ...) pointed at a private server
(--redis-url). Nothing of redis-py's tests is changed; in this process only:

- `Redis.lock()` and `redis.asyncio.Redis.lock()` return `RedisPyLock` / `AsyncRedisPyLock`,
  which speak redis-py's Lock API on a seawall.Lock / seawall.aio.Lock: `timeout` is the
  lease (not renewed, as redis-py's is not; None: seawall's default lease, renewed while
  held), `blocking_timeout` the acquire timeout, `extend(t)` is `extend(additional=t)`,
  `extend(t, replace_ttl=True)` is `extend(ttl=t)`, `reacquire()` is `extend()`. A
  `lock_class` other than redis-py's own Lock is built as asked.
- The tests read and write the lock's key by the lock's name ("foo"): redis-py keeps the
  token at the name itself, seawall at `seawall:lock:{foo}`. The clients' single-key
  commands (GET, SET, TTL, ...) address a name that is not a seawall key as that lock's key.

Each test's outcome is written as JSON to $SEAWALL_REDISPY_SUITE_OUT.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest
import redis
import redis.asyncio
import redis.asyncio.lock
import redis.lock
from redis.exceptions import LockError

import seawall
import seawall.aio
from seawall.shared._keys import lock_keys_of, tagged

_outcomes: dict[str, list[str]] = {}
# Commands whose first argument is one key, which the tests give as the lock's name.
_KEYED = {"GET", "SET", "TTL", "PTTL", "EXPIRE", "PEXPIRE", "EXISTS", "DEL", "TYPE"}


def seawall_key(name: str) -> str:
    """The key where seawall.Lock(name) keeps its owner's token."""
    return lock_keys_of(tagged("lock", name)).key


def _keyed(args: tuple[Any, ...]) -> tuple[Any, ...]:
    if len(args) >= 2 and str(args[0]).upper() in _KEYED:
        key = args[1].decode() if isinstance(args[1], bytes) else str(args[1])
        if not key.startswith("seawall:"):
            return (args[0], seawall_key(key), *args[2:])
    return args


class _Token:
    """redis-py's `lock.local`: `.token` is the caller's current token (bytes), or None."""

    def __init__(self, lock: Any) -> None:
        self._lock = lock

    @property
    def token(self) -> bytes | None:
        hold = self._lock._current(adopt=False)
        return None if hold is None else hold.token.encode()


def _lease(timeout: float | None) -> dict[str, Any]:
    # redis-py's timeout is a lease that is not renewed; None is a lock that lasts until
    # released, which for seawall is a lease renewed while held.
    return {} if timeout is None else {"ttl": float(timeout), "renew": False}


def _wait(blocking: bool, blocking_timeout: float | None) -> dict[str, Any]:
    return {"blocking": True, "timeout": blocking_timeout} if blocking else {"blocking": False}


class RedisPyLock:
    """redis-py's Lock API on a seawall.Lock."""

    def __init__(
        self,
        client: Any,
        name: str,
        timeout: float | None = None,
        sleep: float = 0.1,
        blocking: bool = True,
        blocking_timeout: float | None = None,
        thread_local: bool = True,
        raise_on_release_error: bool = True,
    ) -> None:
        self.name = name
        self.timeout = timeout
        self.sleep = sleep  # seawall wakes its waiters instead of polling
        self.blocking = blocking
        self.blocking_timeout = blocking_timeout
        self.raise_on_release_error = raise_on_release_error
        self.lock = seawall.Lock(client, name, **_lease(timeout))
        self.local = _Token(self.lock)

    def acquire(
        self,
        sleep: float | None = None,
        blocking: bool | None = None,
        blocking_timeout: float | None = None,
        token: str | bytes | None = None,
    ) -> bool:
        if token is not None:
            raise ValueError("seawall makes each hold's token itself (128 random bits)")
        blocking = self.blocking if blocking is None else blocking
        waited = self.blocking_timeout if blocking_timeout is None else blocking_timeout
        return self.lock.acquire(**_wait(blocking, waited))

    def release(self) -> None:
        self.lock.release()

    def locked(self) -> bool:
        return self.lock.locked()

    def owned(self) -> bool:
        return self.lock.owned()

    def extend(self, additional_time: float, replace_ttl: bool = False) -> bool:
        if replace_ttl:
            self.lock.extend(ttl=additional_time)
        else:
            self.lock.extend(additional=additional_time)
        return True

    def reacquire(self) -> bool:
        self.lock.extend()
        return True

    def __enter__(self) -> RedisPyLock:
        if self.acquire():
            return self
        raise self.lock._timed_out()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self.release()
        except LockError:
            if self.raise_on_release_error:
                raise


class AsyncRedisPyLock:
    """redis.asyncio's Lock API on a seawall.aio.Lock."""

    def __init__(
        self,
        client: Any,
        name: str,
        timeout: float | None = None,
        sleep: float = 0.1,
        blocking: bool = True,
        blocking_timeout: float | None = None,
        thread_local: bool = True,
        raise_on_release_error: bool = True,
    ) -> None:
        self.name = name
        self.timeout = timeout
        self.sleep = sleep
        self.blocking = blocking
        self.blocking_timeout = blocking_timeout
        self.raise_on_release_error = raise_on_release_error
        self.lock = seawall.aio.Lock(client, name, **_lease(timeout))
        self.local = _Token(self.lock)

    async def acquire(
        self,
        blocking: bool | None = None,
        blocking_timeout: float | None = None,
        token: str | bytes | None = None,
    ) -> bool:
        if token is not None:
            raise ValueError("seawall makes each hold's token itself (128 random bits)")
        blocking = self.blocking if blocking is None else blocking
        waited = self.blocking_timeout if blocking_timeout is None else blocking_timeout
        return await self.lock.acquire(**_wait(blocking, waited))

    async def release(self) -> None:
        await self.lock.release()

    async def locked(self) -> bool:
        return await self.lock.locked()

    async def owned(self) -> bool:
        return await self.lock.owned()

    async def extend(self, additional_time: float, replace_ttl: bool = False) -> bool:
        if replace_ttl:
            await self.lock.extend(ttl=additional_time)
        else:
            await self.lock.extend(additional=additional_time)
        return True

    async def reacquire(self) -> bool:
        await self.lock.extend()
        return True

    async def __aenter__(self) -> AsyncRedisPyLock:
        if await self.acquire():
            return self
        raise self.lock._timed_out()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            await self.release()
        except LockError:
            if self.raise_on_release_error:
                raise


def _sync_lock(self: Any, name: str, *args: Any, lock_class: Any = None, **kwargs: Any) -> Any:
    if lock_class not in (None, redis.lock.Lock):
        return lock_class(self, name, *args, **kwargs)
    return RedisPyLock(self, name, *args, **kwargs)


def _async_lock(self: Any, name: str, *args: Any, lock_class: Any = None, **kwargs: Any) -> Any:
    if lock_class not in (None, redis.asyncio.lock.Lock):
        return lock_class(self, name, *args, **kwargs)
    return AsyncRedisPyLock(self, name, *args, **kwargs)


def pytest_configure(config: pytest.Config) -> None:
    redis.Redis.lock = _sync_lock  # type: ignore[method-assign,assignment]
    redis.asyncio.Redis.lock = _async_lock  # type: ignore[method-assign,assignment]
    sync_execute = redis.Redis.execute_command
    async_execute = redis.asyncio.Redis.execute_command

    def execute(self: Any, *args: Any, **options: Any) -> Any:
        return sync_execute(self, *_keyed(args), **options)

    async def execute_async(self: Any, *args: Any, **options: Any) -> Any:
        return await async_execute(self, *_keyed(args), **options)

    redis.Redis.execute_command = execute  # type: ignore[method-assign]
    redis.asyncio.Redis.execute_command = execute_async  # type: ignore[method-assign]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # A test's outcome: its call's, unless its setup or teardown failed.
    name = report.nodeid
    counts = report.when == "call" or report.outcome != "passed"
    if counts and _outcomes.get(name, ["passed"])[0] == "passed":
        detail = "" if report.passed else str(report.longrepr)[-1500:]
        _outcomes[name] = [report.outcome, detail]


def pytest_sessionfinish(session: Any) -> None:
    Path(os.environ["SEAWALL_REDISPY_SUITE_OUT"]).write_text(json.dumps(_outcomes, indent=1))
