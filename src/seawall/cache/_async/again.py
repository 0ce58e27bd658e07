"""Second deletes of the delayed double delete, kept in Redis until they are carried out.

`Cache.delete(key, again_after=s)` records the second delete in a sorted set of its
namespace (key text -> due time in server ms) before the first delete, so it happens even
if the caller dies right after. The same script announces it on the namespace's channel
"seawall:again:<namespace>" (see _invalidation_message).

Every process with a Cache of that namespace open runs one sweeper per client (per
process, or per event loop in asyncio), beside the client's invalidation listener, which
hears the announcements. A sweeper looks at a schedule only when something may be due
there: at the due time of the deletes its own process scheduled, GRACE after the due time
of those another process announced (that process carries them out itself unless it died),
once when a namespace is first opened here, and once per namespace whenever the listener
(re)subscribes, as announcements may have been missed meanwhile. An idle process sends
nothing; the look itself is MEMORY USAGE, which the server does not count as a keyspace
hit or miss, so `seawall stats` shows the application's hit rate. Where something is
scheduled, one script claims what is due (so exactly one process deletes each key, and a
claimant that dies is taken over CLAIM seconds later), the cache deletes those keys
everywhere (Redis and every L1), and a last script removes them from the schedule.

Nothing is dropped when Redis is away: a claimed key stays in the schedule, and a delete
whose schedule could not even be written stays in this process's memory; both are retried
with backoff, and the outage is logged once at WARNING (its end at INFO) when a second
delete is known to be waiting; a look that found nothing to do fails quietly.
"""

from __future__ import annotations

import math
import threading
import uuid
import weakref
from collections.abc import Iterable
from typing import Any, Protocol

import redis

from seawall.cache import _invalidation_message as message_format
from seawall.cache._async.invalidation import get_invalidator
from seawall.errors import ClusterClientError
from seawall.shared import _concurrency, _direct, _scripts
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

# Another process's announced second deletes are looked at this long after they are due
# (the announcer carries them out itself unless it died): a second delete whose scheduling
# process died is carried out within about this of its due time.
GRACE = 0.5
# The sweeper's loop wakes at least this often to drop namespaces nobody has open; an
# idle wake-up sends nothing to Redis.
IDLE_WAKE = 5.0
# A claimed delete not confirmed within this long is due again (its claimant died, or the
# claim's reply was lost to a timeout as Redis thawed: its deletes are that much late).
# Short, because carrying a delete out twice is harmless; a batch takes milliseconds.
CLAIM = 2.0
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


# The sender id of this process's announcements (the message format wants 32 hex digits).
_SENDER = uuid.uuid4().hex


async def schedule(client: Any, namespace: str, texts: Iterable[str], delay: float) -> None:
    """Record second deletes of `texts` due `delay` seconds from now (server time), and
    announce them to every process with the namespace open."""
    members = list(texts)
    if members:
        delay_ms = max(0, round(delay * 1000))
        head = f"{_SENDER}:{message_format.AGAIN}:"
        channel = message_format.again_channel(namespace)
        await run_script(
            client, _SCHEDULE, (schedule_key(namespace),), (delay_ms, channel, head, *members)
        )


class _Hearing:
    """Registered with the client's invalidation listener for each namespace served, so
    that the listener runs (and hears announcements) even where no Cache keeps an L1."""

    max_entries = 0

    def discard(self, key: str) -> None:
        pass

    def clear(self) -> None:
        pass


class AsyncAgainSweeper:
    """Carries out due second deletes for every Cache of one client in this process."""

    def __init__(self, client: Any) -> None:
        self._client = weakref.ref(client)
        self._mutex = threading.Lock()
        self._caches: dict[str, weakref.WeakSet[Any]] = {}
        # namespace -> monotonic time to look again (inf: nothing known to be scheduled)
        self._next: dict[str, float] = {}
        # namespace -> the earliest look asked for while it was being served: the serve's
        # own verdict must not erase it (a delete that failed meanwhile, an announcement)
        self._asked: dict[str, float] = {}
        self._expected: set[str] = set()  # namespaces with second deletes known to wait
        self._hearing: dict[str, _Hearing] = {}  # held while the namespace is served
        self._unrecorded: dict[str, dict[str, float]] = {}  # namespace -> key -> delay
        self._plain_reads = False  # MEMORY USAGE refused (ACL, renamed): ZRANGE instead
        self._broken: set[str] = set()  # namespaces this client can never serve
        self._wake = AsyncEvent()
        self._worker: AsyncWorker | None = None
        self._failures = 0
        self.carried_out = 0  # second deletes this process made (for tests and stats)

    def register(self, cache: Deleter) -> None:
        """Serve `cache`'s namespace while `cache` lives; looks at its schedule once now
        (overdue deletes of processes that died), then when announcements say."""
        namespace = cache.namespace
        with self._mutex:
            self._caches.setdefault(namespace, weakref.WeakSet()).add(cache)
            new = namespace not in self._next
            if new:
                self._ask(namespace, 0.0)
            if self._worker is None or not self._worker.alive():
                self._worker = AsyncWorker(self._run, "seawall-cache-again")
        if new:
            self._listen(namespace)
        self._wake.set()

    def _listen(self, namespace: str) -> None:
        client = self._client()
        if client is None:
            return
        hearing = self._hearing.setdefault(namespace, _Hearing())
        invalidator = get_invalidator(client)
        invalidator.register(namespace, hearing)
        invalidator.on_again(self.announced)

    def due_in(self, namespace: str, delay: float) -> None:
        """This process scheduled a second delete of `namespace` due in `delay` s."""
        self._expect(namespace, _concurrency.monotonic() + max(0.0, delay))

    def announced(self, namespace: str | None, delay: float) -> None:
        """The listener heard that second deletes of `namespace` are due in `delay` s (or,
        for None, may have missed announcements: every namespace is looked at now)."""
        now = _concurrency.monotonic()
        if namespace is None:
            with self._mutex:
                for served in list(self._next):
                    if served not in self._broken:
                        self._ask(served, now)
            self._wake.set()
        elif namespace in self._next:
            self._expect(namespace, now + delay + GRACE)

    def _expect(self, namespace: str, at: float) -> None:
        with self._mutex:
            if namespace in self._broken:
                return
            self._ask(namespace, at)
            self._expected.add(namespace)
        self._wake.set()

    def unrecorded(self, namespace: str, texts: Iterable[str], delay: float) -> None:
        """Deletes whose schedule could not be written (Redis away): this process retries
        the whole delete (first and second) until Redis takes it."""
        with self._mutex:
            pending = self._unrecorded.setdefault(namespace, {})
            for text in texts:
                pending[text] = delay
            self._ask(namespace, 0.0)
        self._wake.set()

    def _ask(self, namespace: str, at: float) -> None:
        """Look at `namespace` by `at` (monotonic); called holding the mutex."""
        self._next[namespace] = min(self._next.get(namespace, at), at)
        self._asked[namespace] = min(self._asked.get(namespace, at), at)

    def _settle(self, namespace: str, at: float) -> None:
        """A serve's verdict: look again at `at`, or sooner if asked to meanwhile (a delete
        that could not be recorded, an announcement heard during the serve); called
        holding the mutex."""
        self._next[namespace] = min(at, self._asked.pop(namespace, math.inf))

    def _live(self) -> dict[str, Deleter]:
        """A live cache of each namespace served (dropping namespaces nobody has open)."""
        with self._mutex:
            live = {}
            for namespace, caches in list(self._caches.items()):
                cache = next(iter(caches), None)
                if cache is None:
                    del self._caches[namespace]
                    self._next.pop(namespace, None)
                    self._asked.pop(namespace, None)
                    self._expected.discard(namespace)
                    self._forget_hearing(namespace)
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
                    with self._mutex:
                        self._asked.pop(namespace, None)  # served from here on
                    await self._serve(namespace, cache)
            del cache, live  # hold no cache while idle: it may be collected
            async_raise_if_cancelled()  # a serve may have swallowed it, as above
            self._wake.clear()  # before reading _next: a due_in() from now on wakes us
            with self._mutex:
                wait = min(self._next.values(), default=math.inf) - now
            await self._wake.wait(max(0.0, min(wait, IDLE_WAKE)))

    async def _serve(self, namespace: str, cache: Deleter) -> None:
        client = self._client()
        if client is None:
            with self._mutex:
                self._caches.clear()
            return
        try:
            await self._record_unrecorded(namespace, cache, client)
            wait = await self._sweep(namespace, cache, client)
        except ClusterClientError as exc:
            # Retrying cannot help: say it once and stop serving the namespace here.
            _concurrency.log.error("cache %r: second deletes stop: %s", namespace, exc)
            with self._mutex:
                self._broken.add(namespace)
                self._next[namespace] = math.inf
                self._asked.pop(namespace, None)
                self._expected.discard(namespace)
            return
        except Exception as exc:
            async_raise_if_cancelled()
            self._failed(namespace, exc)
            return
        if self._failures:
            _concurrency.log.info("cache %r: Redis answers again; second deletes resume", namespace)
            self._failures = 0
        with self._mutex:
            if wait is None:
                self._settle(namespace, math.inf)
                if not self._unrecorded.get(namespace):
                    self._expected.discard(namespace)
            else:
                self._settle(namespace, _concurrency.monotonic() + wait)

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

    async def _sweep(self, namespace: str, cache: Deleter, client: Any) -> float | None:
        """Carry out what is due; returns seconds until the next due key (None: none).

        An empty schedule costs one read that the server counts neither as a hit nor as a
        miss, and no script."""
        key = schedule_key(namespace)
        if not await self._scheduled(client, key):
            return None
        while True:
            reply = await run_script(client, _CLAIM, (key,), (BATCH, round(CLAIM * 1000)))
            claim, next_ms = int(reply[0]), int(reply[1])
            texts = [_scripts.reply_text(member) for member in reply[2:]]
            if texts:
                await cache._drop_everywhere(texts)
                await run_script(client, _DONE, (key,), (claim, *texts))
                self.carried_out += len(texts)
            if len(texts) < BATCH:
                return None if next_ms < 0 else next_ms / 1000

    async def _scheduled(self, client: Any, key: str) -> bool:
        try:
            if not self._plain_reads:
                try:
                    return await client.memory_usage(key, samples=1) is not None
                except redis.exceptions.AskError:
                    raise
                except redis.ResponseError:
                    self._plain_reads = True  # not allowed here: a read the server counts
            return bool(await client.zrange(key, 0, 0))
        except redis.exceptions.AskError as exc:  # MOVED too: a plain client on Cluster
            raise _direct.wrong_client(client, exc) from exc

    def _forget_hearing(self, namespace: str) -> None:
        """Called holding the mutex, for a namespace nobody has open any more."""
        hearing = self._hearing.pop(namespace, None)
        client = self._client()
        if hearing is not None and client is not None:
            get_invalidator(client).unregister(namespace, hearing)

    def _failed(self, namespace: str, exc: Exception) -> None:
        with self._mutex:
            expected = namespace in self._expected or bool(self._unrecorded.get(namespace))
        if not expected:
            # A look with nothing known to wait: no second delete is late, nothing to say,
            # and nothing to retry. Redis away means the listener's connection too: its
            # next subscription has every namespace looked at again (see announced).
            _concurrency.log.debug("cache %r: looking at second deletes: %r", namespace, exc)
            with self._mutex:
                self._settle(namespace, math.inf)
            return
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
        self._retry(namespace, self._failures)

    def _retry(self, namespace: str, failures: int) -> None:
        first, last = BACKOFF
        delay = min(last, first * 2 ** min(failures - 1, 16))
        with self._mutex:
            self._settle(namespace, _concurrency.monotonic() + delay)


_registry = ScopedRegistry()


def get_sweeper(client: Any) -> AsyncAgainSweeper:
    """The sweeper for `client` in this process (in the running event loop for asyncio)."""
    return _registry.get(async_scope(), client, lambda: AsyncAgainSweeper(client))
