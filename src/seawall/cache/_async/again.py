"""Second deletes of the delayed double delete, kept in Redis until they are carried out.

`Cache.delete(key, again_after=s)` records the second delete in a sorted set of its
namespace (key text -> due time in server ms) before the first delete, so it happens even
if the caller dies right after. Every process with a Cache of that namespace open runs one
sweeper per client (per process, or per event loop in asyncio). It looks at each schedule
it serves at least every CHECK_EVERY seconds (one ZRANGE while it is empty, no script),
and at the due time of the deletes its own
process scheduled; one script claims what is due (so exactly one process deletes each key,
and a claimant that dies is taken over CLAIM seconds later), the cache deletes those keys
everywhere (Redis and every L1), and a last script removes them from the schedule.

Nothing is dropped when Redis is away: a claimed key stays in the schedule, and a delete
whose schedule could not even be written stays in this process's memory; both are retried
with backoff, and the outage is logged once at WARNING (its end at INFO).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable
from typing import Any, Protocol

from seawall.shared import _concurrency, _scripts
from seawall.shared._async.scripts import run_script
from seawall.shared._concurrency import (
    AsyncEvent,
    AsyncWorker,
    ScopedRegistry,
    async_raise_if_cancelled,
    async_scope,
)
from seawall.shared._keys import tagged

_SCHEDULE = _scripts.load("seawall.cache", "cache_again_schedule")
_CLAIM = _scripts.load("seawall.cache", "cache_again_claim")
_DONE = _scripts.load("seawall.cache", "cache_again_done")

# A process looks at each schedule it serves at least this often: a second delete whose
# scheduling process died is carried out within this of its due time.
CHECK_EVERY = 0.5
# A claimed delete not confirmed within this long is due again (its claimant died).
CLAIM = 5.0
# Keys claimed per script call.
BATCH = 200
# Retry delays while Redis is away: doubling from the first to the last.
BACKOFF = (0.05, 5.0)


def schedule_key(namespace: str) -> str:
    """The sorted set of second deletes of cache `namespace`."""
    return tagged("cache-again", namespace)


class Deleter(Protocol):
    """What the sweeper needs from a Cache: its namespace and a delete everywhere."""

    namespace: str

    async def _drop_everywhere(self, texts: list[str]) -> None: ...


async def schedule(client: Any, namespace: str, texts: Iterable[str], delay: float) -> None:
    """Record second deletes of `texts` due `delay` seconds from now (server time)."""
    members = list(texts)
    if members:
        delay_ms = max(0, round(delay * 1000))
        await run_script(client, _SCHEDULE, (schedule_key(namespace),), (delay_ms, *members))


class AsyncAgainSweeper:
    """Carries out due second deletes for every Cache of one client in this process."""

    def __init__(self, client: Any) -> None:
        self._client = weakref.ref(client)
        self._mutex = threading.Lock()
        self._caches: dict[str, weakref.WeakSet[Any]] = {}
        self._next: dict[str, float] = {}  # namespace -> monotonic time to look again
        self._unrecorded: dict[str, dict[str, float]] = {}  # namespace -> key -> delay
        self._wake = AsyncEvent()
        self._worker: AsyncWorker | None = None
        self._failures = 0
        self.carried_out = 0  # second deletes this process made (for tests and stats)

    def register(self, cache: Deleter) -> None:
        """Serve `cache`'s namespace while `cache` lives; looks at its schedule at once."""
        with self._mutex:
            self._caches.setdefault(cache.namespace, weakref.WeakSet()).add(cache)
            self._next.setdefault(cache.namespace, 0.0)
            if self._worker is None or not self._worker.alive():
                self._worker = AsyncWorker(self._run, "seawall-cache-again")
        self._wake.set()

    def due_in(self, namespace: str, delay: float) -> None:
        """This process scheduled a second delete of `namespace` due in `delay` s."""
        at = _concurrency.monotonic() + max(0.0, delay)
        with self._mutex:
            self._next[namespace] = min(self._next.get(namespace, at), at)
        self._wake.set()

    def unrecorded(self, namespace: str, texts: Iterable[str], delay: float) -> None:
        """Deletes whose schedule could not be written (Redis away): this process retries
        the whole delete (first and second) until Redis takes it."""
        with self._mutex:
            pending = self._unrecorded.setdefault(namespace, {})
            for text in texts:
                pending[text] = delay
            self._next[namespace] = 0.0
        self._wake.set()

    def _live(self) -> dict[str, Deleter]:
        """A live cache of each namespace served (dropping namespaces nobody has open)."""
        with self._mutex:
            live = {}
            for namespace, caches in list(self._caches.items()):
                cache = next(iter(caches), None)
                if cache is None:
                    del self._caches[namespace]
                    self._next.pop(namespace, None)
                else:
                    live[namespace] = cache
            if not live:
                self._worker = None
            return live

    async def _run(self) -> None:
        while True:
            # redis-py can swallow a cancellation mid-call and even answer after it: the
            # task then runs on, asked to stop, and asyncio.run() would wait for it forever.
            async_raise_if_cancelled()
            live = self._live()
            if not live:
                return
            now = _concurrency.monotonic()
            for namespace, cache in live.items():
                if self._next.get(namespace, 0.0) <= now:
                    await self._serve(namespace, cache)
            del cache, live  # hold no cache while idle: it may be collected
            self._wake.clear()  # before reading _next: a due_in() from now on wakes us
            with self._mutex:
                wait = min(self._next.values(), default=now + CHECK_EVERY) - now
            await self._wake.wait(max(0.0, min(wait, CHECK_EVERY)))

    async def _serve(self, namespace: str, cache: Deleter) -> None:
        client = self._client()
        if client is None:
            with self._mutex:
                self._caches.clear()
            return
        try:
            await self._record_unrecorded(namespace, cache, client)
            wait = await self._sweep(namespace, cache, client)
        except Exception as exc:
            async_raise_if_cancelled()
            self._failed(namespace, exc)
            return
        if self._failures:
            _concurrency.log.info("cache %r: Redis answers again; second deletes resume", namespace)
            self._failures = 0
        with self._mutex:
            self._next[namespace] = _concurrency.monotonic() + min(wait, CHECK_EVERY)

    async def _record_unrecorded(self, namespace: str, cache: Deleter, client: Any) -> None:
        with self._mutex:
            pending = dict(self._unrecorded.get(namespace, {}))
        for text, delay in pending.items():
            await schedule(client, namespace, [text], delay)
            await cache._drop_everywhere([text])
            with self._mutex:
                self._unrecorded.get(namespace, {}).pop(text, None)
            self.due_in(namespace, delay)
        with self._mutex:
            if not self._unrecorded.get(namespace, True):
                del self._unrecorded[namespace]

    async def _sweep(self, namespace: str, cache: Deleter, client: Any) -> float:
        """Carry out what is due; returns seconds until the next due key (or CHECK_EVERY).

        An empty schedule, the usual case, costs one plain read and no script."""
        key = schedule_key(namespace)
        if not await client.zrange(key, 0, 0):
            return CHECK_EVERY
        while True:
            reply = await run_script(client, _CLAIM, (key,), (BATCH, round(CLAIM * 1000)))
            claim, next_ms = int(reply[0]), int(reply[1])
            texts = [_scripts.reply_text(member) for member in reply[2:]]
            if texts:
                await cache._drop_everywhere(texts)
                await run_script(client, _DONE, (key,), (claim, *texts))
                self.carried_out += len(texts)
            if len(texts) < BATCH:
                return CHECK_EVERY if next_ms < 0 else next_ms / 1000

    def _failed(self, namespace: str, exc: Exception) -> None:
        self._failures += 1
        if self._failures == 1:
            _concurrency.log.warning(
                "cache %r: second deletes cannot reach Redis (%r); they stay "
                "scheduled and are retried with backoff",
                namespace,
                exc,
            )
        else:
            _concurrency.log.debug("cache %r: second deletes: %r", namespace, exc)
        first, last = BACKOFF
        delay = min(last, first * 2 ** min(self._failures - 1, 16))
        with self._mutex:
            self._next[namespace] = _concurrency.monotonic() + delay


_registry = ScopedRegistry()


def get_sweeper(client: Any) -> AsyncAgainSweeper:
    """The sweeper for `client` in this process (in the running event loop for asyncio)."""
    return _registry.get(async_scope(), client, lambda: AsyncAgainSweeper(client))
