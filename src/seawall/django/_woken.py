"""Reads that the requests woken together share: one GET per process, not one per request.

When a page that 50 requests of one process were waiting for is stored, all 50 wake at
once and look it up again (the header list, then the page): 100 GETs in one burst on a
process's pool and its CPU, for the same two values. A lookup made inside
`shared_since(t)` instead joins a GET of the same key that was sent at t or later by
another caller of this process, or sends one that later callers may join.

Why a joined answer is right for the caller: its operation (the request's page lookup,
its wait included) began at t, and the GET it joins was sent after t and answered
before the caller returns, so the value it read was Redis's value at a moment inside the
caller's own operation, which is what a GET of its own would give. A GET sent before t
is never joined: it could predate a write the caller has seen. Each caller decodes the
bytes itself, so no two callers share a response object.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Callable, Iterator
from typing import Any

from seawall.shared import _concurrency

__all__ = ["ReadFlights", "shared_since", "sharing_since"]

# Finished reads kept for late joiners; past this many, those older than KEEP_SECONDS go.
KEEP_READS = 256
KEEP_SECONDS = 5.0

_since: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "seawall_django_reads_shared_since", default=None
)


@contextlib.contextmanager
def shared_since(started: float) -> Iterator[None]:
    """Within it, RedisCache.get() of this thread may share a GET sent at `started`
    (a monotonic time) or later by another thread of this process."""
    token = _since.set(started)
    try:
        yield
    finally:
        _since.reset(token)


def sharing_since() -> float | None:
    """The start set by the innermost shared_since() of this thread, or None."""
    return _since.get()


class _Read:
    __slots__ = ("answer", "done", "failed", "sent")

    def __init__(self, sent: float) -> None:
        self.sent = sent
        self.done = threading.Event()
        self.answer: Any = None
        self.failed = False


class ReadFlights:
    """The last GET of each key made through read(), shared by one process's threads."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._reads: dict[str, _Read] = {}

    def read(self, key: str, since: float, fetch: Callable[[], Any], wait: float) -> Any:
        """`key`'s raw value, from a GET sent at `since` or later: joined if one was,
        else fetch() here. A joiner waits `wait` seconds at most for the GET it joined,
        and fetches for itself if that GET failed or is not answered by then."""
        with self._mutex:
            read = self._reads.get(key)
            joined = read is not None and read.sent >= since
            if not joined:
                now = _concurrency.monotonic()
                if len(self._reads) >= KEEP_READS:
                    self._forget_before(now - KEEP_SECONDS)
                read = self._reads[key] = _Read(now)
        assert read is not None
        if joined:
            if read.done.wait(wait) and not read.failed:
                return read.answer
            return fetch()
        try:
            read.answer = fetch()
        except BaseException:
            read.failed = True
            raise
        finally:
            read.done.set()
        return read.answer

    def _forget_before(self, moment: float) -> None:
        for key in [k for k, r in self._reads.items() if r.done.is_set() and r.sent < moment]:
            del self._reads[key]
