"""Reads that requests looking a page up together share: one GET per process, not one each.

When a page that 50 requests of one process were waiting for is stored, all 50 wake at
once and look it up again (the header list, then the page): 100 GETs in one burst on a
process's pool and its CPU, for the same two values; so do 50 requests that arrive
together for a hot page. A lookup made inside `shared_since(t, kind)` instead joins a GET
of the same key that was sent at t or later by another caller of this process making the
same kind of lookup, or sends one that later callers may join.

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
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

from seawall.shared import _concurrency

__all__ = ["FIRST", "WOKEN", "ReadFlights", "shared_since", "sharing_since"]

# Finished reads are kept this long for late joiners (a joiner's own start bounds what
# it may take, so keeping them longer would only cost memory).
KEEP_SECONDS = 5.0

# Lookups that share: a page's first lookup by the requests that arrive together, and
# the lookup again by the requests woken once it is stored. Each shares only with its own
# kind: a woken request joining a first lookup's GET (sent after it arrived, but before
# the page it waited for was stored) would read the miss it was woken from.
FIRST = "first"
WOKEN = "woken"

_since: contextvars.ContextVar[tuple[float, str] | None] = contextvars.ContextVar(
    "seawall_django_reads_shared_since", default=None
)


@contextlib.contextmanager
def shared_since(started: float, kind: str = WOKEN) -> Iterator[None]:
    """Within it, RedisCache.get() of this thread may share a GET sent at `started`
    (a monotonic time) or later by another thread of this process, for a lookup of the
    same `kind` (FIRST or WOKEN)."""
    token = _since.set((started, kind))
    try:
        yield
    finally:
        _since.reset(token)


def sharing_since() -> tuple[float, str] | None:
    """(start, kind) set by the innermost shared_since() of this thread, or None."""
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
        # Oldest first: a key read again moves to the end, so forgetting old reads looks
        # at the front only (every cached page's lookup registers one).
        self._reads: OrderedDict[str, _Read] = OrderedDict()

    def read(self, key: str, since: float, fetch: Callable[[], Any], wait: float) -> Any:
        """`key`'s raw value, from a GET sent at `since` or later: joined if one was,
        else fetch() here. A joiner waits `wait` seconds at most for the GET it joined,
        and fetches for itself if that GET failed or is not answered by then."""
        with self._mutex:
            read = self._reads.get(key)
            joined = read is not None and read.sent >= since
            if not joined:
                now = _concurrency.monotonic()
                self._forget_before(now - KEEP_SECONDS)
                self._reads.pop(key, None)
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
        reads = self._reads
        while reads:
            oldest = next(iter(reads.values()))
            if oldest.sent >= moment or not oldest.done.is_set():
                return
            reads.popitem(last=False)
