"""Exported lock metrics: every acquire() of the lock family, counted and timed once.

`measured` wraps a class's own `acquire` (AsyncHolder does it for each subclass), so
Lock, RLock, Semaphore, both RWLock sides and Redlock are covered without a line in their
acquire code. An acquire that calls another measured acquire (RLock's first entry goes
through Lock's) is counted once, by the outermost: a context variable marks the call.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable
from typing import Any

from seawall.metrics._families import LOCK_ACQUISITIONS, LOCK_LEASES_LOST, LOCK_WAIT_SECONDS
from seawall.metrics._sink import SINK
from seawall.shared import _concurrency

_measuring: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "seawall_measuring_acquire", default=False
)

Acquire = Callable[..., Any]  # an acquire method (a coroutine function in asyncio)


def metric_kind(cls: type) -> str:
    """The `kind` label: lock, rlock, semaphore, readlock, writelock or redlock."""
    return cls.__name__.removeprefix("Async").lower()


def measured(acquire: Acquire, kind: str) -> Acquire:
    @functools.wraps(acquire)
    async def measured_acquire(
        self: Any, blocking: bool = True, timeout: float | None = None
    ) -> bool:
        if not SINK.enabled or _measuring.get():
            return bool(await acquire(self, blocking, timeout))
        token = _measuring.set(True)
        started = _concurrency.monotonic()
        result = "error"
        try:
            acquired = bool(await acquire(self, blocking, timeout))
            result = "acquired" if acquired else ("timeout" if blocking else "busy")
            if acquired:
                SINK.observe(LOCK_WAIT_SECONDS.name, (kind,), _concurrency.monotonic() - started)
            return acquired
        finally:
            _measuring.reset(token)
            SINK.count(LOCK_ACQUISITIONS.name, (kind, result))

    measured_acquire.__seawall_measured__ = True  # type: ignore[attr-defined]
    return measured_acquire


def lease_lost(cls: type) -> None:
    SINK.count(LOCK_LEASES_LOST.name, (metric_kind(cls),))
