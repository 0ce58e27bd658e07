"""Wake-ups for blocked acquirers: one pub/sub connection per client, per process or loop.

Waiters for one lock in one process queue up locally (FIFO) and only the head of that
queue talks to Redis, so 1,000 threads blocked on a lock use one pool connection for their
attempts plus this waker's pub/sub connection. A failed attempt by a head also enters the
process, by the waker's id, in the lock's queue in Redis (same script, no extra round
trip). A release pops the process that has waited longest and publishes to that process's
own channel; its waker makes the local head's next try at once, from the listener that
heard it, and wakes the head with the answer (a lock's head waits with that try ready:
`AsyncTurn.wait_or_try`), so a hand-over waits for no thread to be scheduled before its
request leaves. One process is woken per release, so contended locks cost no herd of
failing attempts. A lock released to a starving waiter is granted to it outright (see
lock_release.lua): the message names the head's token and fence, and the listener hands
the head its hold with no try at all.

Semaphores queue the same way under their own keys (a release wakes as many processes as
there are free permits); `_OTHER_QUEUES` says how a process leaves their queues.

Pub/sub loses messages while its connection is down, and a popped process may have died.
Every wait is therefore bounded (`_lease.wait_slice`); after a reconnect every head is
woken to look again; a wake-up for a lock nobody here waits for any more is passed on.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import uuid
import weakref
from collections import deque
from collections.abc import Callable
from types import TracebackType
from typing import Any, cast

import redis.asyncio

from seawall.errors import LockError
from seawall.shared import _concurrency, _scripts
from seawall.shared._async.scripts import run_script
from seawall.shared._bounded import async_execute, async_until, last_look
from seawall.shared._concurrency import (
    AsyncEvent,
    AsyncWorker,
    ScopedRegistry,
    async_background,
    async_raise_if_cancelled,
    async_scope,
    async_sleep,
)
from seawall.shared._keys import WAKE_PREFIX, kind_of, lock_keys_of, semaphore_keys_of
from seawall.shared._validate import AsyncClient

_PASS_WAKE = _scripts.load("seawall.locks", "lock_pass_wake")

# Queues of primitives other than the lock, by key kind: their queue keys from the main
# key, and one script (ARGV: wake-up channel prefix, waker id) that takes this process off
# the queue and wakes the next waiter. It serves both leaving the queue and passing a
# wake-up on: with more than one permit, a wake-up nobody here takes must go on as well.
_OTHER_QUEUES: dict[str, tuple[Callable[[str], tuple[str, ...]], _scripts.LuaScript]] = {
    "semaphore": (
        lambda key: semaphore_keys_of(key).queue,
        _scripts.load("seawall.locks", "semaphore_leave"),
    ),
}

# The listener exits after this long with nobody waiting; POLL is how often it looks.
IDLE_EXIT = 10.0
POLL = 1.0
RECONNECT_BACKOFF = 0.05


# What a try the listener made for a waiter brought: (True, the try's answer) or (False,
# the exception it raised), as if the waiter had made it (see AsyncTurn.wait_or_try).
Made = tuple[bool, Any]


class _Waiter:
    """One blocked acquire. Events are made only when needed: most acquires never wait."""

    __slots__ = ("abandon", "attempt", "grant", "made", "signal", "token", "trying", "turn")

    def __init__(self) -> None:
        self.turn: AsyncEvent | None = None  # set when this waiter becomes the head
        self.signal: AsyncEvent | None = None  # set when the lock may have become free
        # While the head waits in wait_or_try: its next try, for the listener to make.
        self.attempt: Callable[[], Any] | None = None
        self.trying = False  # the listener is making that try
        self.made: Made | None = None  # its outcome, until the waiter takes it
        # Set when the waiter gave up during the try: the listener gives back its grant.
        self.abandon: Callable[[Made], None] | None = None
        # A lock's head that may be granted the lock: its token, and while it waits in
        # wait_or_try, what takes the hold a release granted it (given the fence).
        self.token: str | None = None
        self.grant: Callable[[int], Any] | None = None


class AsyncTurn:
    """A place in the local queue of one lock; `async with waker.turn(lock_key)`."""

    def __init__(self, waker: AsyncWaker, key: str, claimed: _Waiter | None = None) -> None:
        self._waker = waker
        self._key = key
        self._claimed = claimed is not None
        self._waiter = _Waiter() if claimed is None else claimed

    async def __aenter__(self) -> AsyncTurn:
        if not self._claimed:  # a claim is already the head of the local queue
            self._waker._join(self._key, self._waiter)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._waker.unclaim(self._key, self._waiter)

    def queueing(self) -> bool:
        """This process is about to queue itself for the lock (a try with `waiter_id`).

        Returns whether it may be queued already: only then must a successful try take it
        off the queue (two commands a barging re-acquire need not run).
        """
        with self._waker._mutex:
            queued = self._key in self._waker._queued
            self._waker._queued.add(self._key)
            return queued

    def dequeued(self) -> None:
        """A queued try acquired the lock; the script took this process off the queue."""
        with self._waker._mutex:
            self._waker._queued.discard(self._key)

    @property
    def first(self) -> bool:
        """Whether this waiter found the local queue empty (it never waited for a turn)."""
        return self._waiter.turn is None

    async def wait_turn(self, timeout: float | None) -> bool:
        """Wait to become the head of the local queue; False on timeout."""
        event = self._waiter.turn
        return True if event is None else await event.wait(timeout)

    @property
    def waiter_id(self) -> str | None:
        """The id to queue this process under, once its wake-up channel is listened to."""
        return self._waker.id if self._waker.ready else None

    async def listen(self, timeout: float | None) -> None:
        """Start the process's listener (once) and wait until it is subscribed."""
        await self._waker._start(timeout)

    def rearm(self) -> bool:
        """Forget earlier wake-ups; call it just before a try, never after a wait.

        A wake-up that arrives during the try then stays set for the next wait, instead of
        being erased together with one that was already used. Returns whether a wake-up
        was pending: one that came after the last wait ran out is answered by the try that
        follows, which must count as woken (a lock's release does not wake a process again
        for a moment after waking it, so that process must look again by itself).
        """
        with self._waker._mutex:  # a wake-up is set under it: none slips between the two
            signal = self._waiter.signal
            if signal is None or not signal.is_set():
                return False
            signal.clear()
            return True

    async def wait_signal(self, timeout: float) -> bool:
        """Wait for a wake-up since the last `rearm`; False when `timeout` passed first."""
        return await self._waker._signal_of(self._waiter).wait(timeout)

    async def wait_or_try(
        self,
        timeout: float,
        attempt: Callable[[], Any],
        abandon: Callable[[Made], None],
        grant: tuple[str, Callable[[int], Any]] | None = None,
    ) -> tuple[bool, Made | None]:
        """`wait_signal`, with the try a wake-up calls for made by the listener that hears
        it: (woken, made), `made` None when the waiter must try itself.

        `attempt` is the waiter's next try, the very call it would make (the acquire
        script is idempotent for its token, so nothing depends on who sends it). The
        listener sends it as soon as the wake-up arrives, from a thread (task) that is
        already running, and wakes the waiter once, with the answer: a hand-over then
        waits for no thread to be scheduled before its request leaves. A try in flight
        when the wait ends is waited for (it ends by the acquire's deadline). If the
        waiter is interrupted meanwhile, `abandon(made)` gives back what the try was
        granted, by whichever side sees the outcome first.

        `grant` (a lock's head): its token, and what takes the hold when a release grants
        the lock to that token (see `AsyncWaker._on_grant`): the listener then calls it
        instead of the try, and wakes the waiter with its answer the same way.
        """
        waker, waiter = self._waker, self._waiter
        signal = waker._signal_of(waiter)
        with waker._mutex:
            waiter.attempt = attempt
            if grant is not None:
                waiter.token, waiter.grant = grant
        try:
            woken = await signal.wait(timeout)
            while True:
                with waker._mutex:
                    waiter.attempt = waiter.grant = None
                    if not waiter.trying:
                        made, waiter.made = waiter.made, None
                        if made is not None:
                            signal.clear()  # that wake-up was the try's: it is answered
                        return woken or made is not None, made
                    # The try's end sets it. Set already (a wake-up since the wait ended),
                    # waiting on it would not wait: in asyncio it would not even yield,
                    # and the listener, on this loop, could never end the try.
                    signal.clear()
                await signal.wait(None)
                woken = True
        except BaseException:
            with waker._mutex:
                waiter.attempt = waiter.grant = None
                made, waiter.made = waiter.made, None
                if waiter.trying:
                    waiter.abandon = abandon
            if made is not None:
                abandon(made)
            raise


class AsyncWaker:
    def __init__(self, client: AsyncClient) -> None:
        # Weak: the registry is keyed by the client, and a strong reference here would keep
        # every client ever used alive.
        self._client = weakref.ref(client)
        self._mutex = threading.Lock()
        self._queues: dict[str, deque[_Waiter]] = {}
        self._queued: set[str] = set()  # locks whose queue in Redis holds this process
        self.id = uuid.uuid4().hex
        self._channel = WAKE_PREFIX + self.id
        self._ready = AsyncEvent()
        self._worker: AsyncWorker | None = None
        self._acks = 0

    def turn(self, key: str, claimed: _Waiter | None = None) -> AsyncTurn:
        return AsyncTurn(self, key, claimed)

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    def claim(self, key: str) -> _Waiter | None:
        """The head of `key`'s local queue for a first try made before a turn, or None.

        Only when nobody here waits for it and this process listens for no wake-ups (so
        the try could not queue it in Redis anyway: the try a turn would begin with).
        Later callers queue behind the claim. Give it back with `unclaim`, or go on from
        it as the head with `turn(key, claimed)`: most acquisitions find the lock free
        and never pay for a turn.
        """
        if self._ready.is_set():
            return None
        with self._mutex:
            if key in self._queues:
                return None
            claimed = _Waiter()
            self._queues[key] = deque((claimed,))
            return claimed

    def unclaim(self, key: str, waiter: _Waiter) -> None:
        """Leave `key`'s local queue (a turn ending, or a claim given back)."""
        if self._leave(key, waiter):
            # Nobody here waits for this lock any more: leave its queue in Redis, so a
            # release wakes a process that still wants it. Before this process queues
            # again (in sync code, in the caller's thread): a withdrawal left to run
            # alongside could remove the entry of this process's next wait, which would
            # then hear no wake-up. Bounded, so a caller whose timeout ran out on a frozen
            # server waits at most LAST_LOOK more; the entry lapses by itself then.
            async_background(
                functools.partial(self._withdraw_briefly, key),
                f"leaving the queue of {key!r}",
            )

    def _join(self, key: str, waiter: _Waiter) -> None:
        with self._mutex:
            queue = self._queues.get(key)
            if queue is None:
                queue = self._queues[key] = deque()
            if queue:
                waiter.turn = AsyncEvent()
            queue.append(waiter)

    def _leave(self, key: str, waiter: _Waiter) -> bool:
        """Leave the local queue; True when it is now empty and Redis still queues us."""
        with self._mutex:
            queue = self._queues[key]
            was_head = queue[0] is waiter
            queue.remove(waiter)
            if not queue:
                del self._queues[key]
                if key in self._queued:
                    self._queued.discard(key)
                    return True
                return False
            if was_head:
                # The new head looks at once: the lock may be free, and a wake-up meant
                # for the old head must not be lost with it.
                head = queue[0]
                assert head.turn is not None
                head.turn.set()
                self._signal_locked(head)
            return False

    def _signal_of(self, waiter: _Waiter) -> AsyncEvent:
        with self._mutex:
            if waiter.signal is None:
                waiter.signal = AsyncEvent()
            return waiter.signal

    def _signal_locked(self, waiter: _Waiter) -> None:
        if waiter.signal is None:
            waiter.signal = AsyncEvent()
        waiter.signal.set()

    def _wake(self, key: str) -> bool:
        """Wake the local head waiting for `key`; False if nobody here waits for it."""
        with self._mutex:
            queue = self._queues.get(key)
            if not queue:
                return False
            self._signal_locked(queue[0])
            return True

    def _take_attempt(self, key: str) -> tuple[str, _Waiter, Callable[[], Any]] | None:
        """The local head for `key` and its try, if it waits with one for the listener."""
        with self._mutex:
            queue = self._queues.get(key)
            head = queue[0] if queue else None
            if head is None or head.attempt is None:
                return None
            attempt, head.attempt, head.grant = head.attempt, None, None
            head.trying = True
            return key, head, attempt

    async def _try_for(self, key: str, head: _Waiter, attempt: Callable[[], Any]) -> None:
        """Make `head`'s try (see AsyncTurn.wait_or_try), then wake it with the outcome."""
        made: Made
        try:
            made = (True, await attempt())
        except Exception as exc:  # the waiter's to raise, as if it had tried itself
            made = (False, exc)
        except BaseException:
            # This listener itself is stopping (its loop ends, the interpreter exits): not
            # the waiter's cancellation, which must not reach it.
            stopped = LockError(
                f"the wake-up listener stopped while trying for {key!r}: the acquire ends"
            )
            self._tried(head, (False, stopped))
            raise
        self._tried(head, made)

    def _on_grant(self, message: str) -> bool:
        """A release granted a lock to a waiter of this process ("=<fence>:<token>:<key>"):
        give the waiter its hold with no try, or wake it to try (the try finds its own
        token: lock_acquire.lua). True when a waiter here was woken.

        A waiter that is gone needs nothing from here: it left the queue of the lock with
        a release of its token (`AsyncLock.acquire`), which gives a grant made before that
        back, and after which none is made.
        """
        fence, token, key = message[1:].split(":", 2)
        with self._mutex:
            queue = self._queues.get(key, ())
            owner = next((waiter for waiter in queue if waiter.token == token), None)
            if owner is None:
                return False
            grant = owner.grant if owner.attempt is not None else None
            if grant is None:  # trying, or between tries: its next try takes the lock
                self._signal_locked(owner)
                return True
            owner.attempt = owner.grant = None
            owner.trying = True
        try:
            made: Made = (True, grant(int(fence)))
        except Exception as exc:
            made = (False, exc)
        self._tried(owner, made)
        return True

    def _tried(self, head: _Waiter, made: Made) -> None:
        with self._mutex:
            head.trying = False
            abandon, head.abandon = head.abandon, None
            if abandon is None:
                head.made = made
                self._signal_locked(head)
        if abandon is not None:
            abandon(made)

    def _wake_all(self) -> None:
        with self._mutex:
            for queue in self._queues.values():
                self._signal_locked(queue[0])

    async def _start(self, timeout: float | None) -> bool:
        with self._mutex:
            if self._worker is None or not self._worker.alive():
                self._ready.clear()
                self._worker = AsyncWorker(self._run, "seawall-waker")
        return await self._ready.wait(timeout)

    async def _withdraw_briefly(self, key: str) -> None:
        try:
            async with async_until(last_look(_concurrency.monotonic())):
                await self._withdraw(key)
        except TimeoutError:
            # No answer (a frozen server): the entry lapses by itself (QUEUE_TTL_MS).
            pass

    async def _withdraw(self, key: str) -> None:
        client = self._client()
        if client is None:
            return
        if not await self._leave_other(client, key):
            waiters = lock_keys_of(key).waiters
            await async_execute(client, ("ZREM", waiters, self.id), waiters)

    async def _leave_other(self, client: AsyncClient, key: str) -> bool:
        """Leave the queue of a primitive other than the lock; False for a lock's key."""
        other = _OTHER_QUEUES.get(kind_of(key))
        if other is None:
            return False
        queue_keys, leave = other
        await run_script(client, leave, queue_keys(key), (WAKE_PREFIX, self.id))
        return True

    async def _pass_on(self, key: str) -> None:
        client = self._client()
        if client is None or await self._leave_other(client, key):
            return
        keys = lock_keys_of(key)
        await run_script(client, _PASS_WAKE, (keys.key, keys.waiters), (WAKE_PREFIX, self.id))

    async def _on_message(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind == "subscribe":
            self._acks += 1
            self._ready.set()
            if self._acks > 1:
                # The client reconnected and re-subscribed by itself: wake-ups may have
                # been lost meanwhile, so every head looks again.
                self._wake_all()
        elif kind == "message":
            key = _scripts.reply_text(message["data"])
            if key.startswith("="):
                if self._on_grant(key):
                    await async_sleep(0)  # let the waiter run now (see below)
                return
            taken = self._take_attempt(key)
            if taken is not None:
                await self._try_for(*taken)
            elif self._wake(key):
                # Let the woken waiter run now, before this listener goes back to reading
                # (in sync code it would otherwise wait for this thread to let go of the
                # GIL, at its next blocking read).
                await async_sleep(0)
            else:
                try:
                    await self._pass_on(key)
                except Exception as exc:  # the lock's queue or the wait slices recover
                    _concurrency.log.info("passing a wake-up on failed: %r", exc)

    async def _open(self) -> Any:
        client = self._client()
        if client is None:
            return None
        pubsub = open_pubsub(client)
        await pubsub.subscribe(self._channel)
        return pubsub

    def _detach_if_idle(self, quiet_since: float) -> bool:
        """True (and the listener is detached) once nobody waited for IDLE_EXIT."""
        if _concurrency.monotonic() - quiet_since <= IDLE_EXIT:
            return False
        with self._mutex:
            if self._queues:
                return False
            self._worker = None
            self._ready.clear()
            return True

    async def _run(self) -> None:
        pubsub: Any = None
        quiet_since = _concurrency.monotonic()
        try:
            while True:
                if pubsub is None:
                    try:
                        pubsub = await self._open()
                    except Exception as exc:
                        async_raise_if_cancelled()
                        _concurrency.log.debug("waker cannot connect: %r", exc)
                        if self._detach_if_idle(quiet_since):
                            return
                        await async_sleep(RECONNECT_BACKOFF)
                        continue
                    if pubsub is None:
                        with self._mutex:
                            self._worker = None
                        return
                try:
                    message = await pubsub.get_message(timeout=POLL)
                except Exception as exc:
                    # redis-py (8.1, seen with Sentinel-managed asyncio clients) can turn the
                    # cancellation of a read into a ConnectionError: reconnecting then would
                    # keep a cancelled listener alive until IDLE_EXIT, and asyncio.run()
                    # would wait for it that long.
                    async_raise_if_cancelled()
                    # Not only ConnectionError: when the user closes the client under us, the
                    # parser can fail with anything. Start over on a fresh connection.
                    _concurrency.log.debug("waker connection failed: %r", exc)
                    self._ready.clear()
                    self._acks = 0
                    self._wake_all()
                    await _close(pubsub)
                    pubsub = None
                    await async_sleep(RECONNECT_BACKOFF)
                    continue
                async_raise_if_cancelled()  # a cancelled read can end as "no message"
                if message is not None:
                    await self._on_message(message)
                with self._mutex:
                    busy = bool(self._queues)
                if busy:
                    quiet_since = _concurrency.monotonic()
                elif message is None and self._detach_if_idle(quiet_since):
                    return
        finally:
            if pubsub is not None:
                await _close(pubsub)


def open_pubsub(client: AsyncClient) -> Any:
    """A pub/sub object that hears PUBLISH from seawall's scripts on `client`'s server(s)."""
    if hasattr(client, "pubsub"):
        return cast(Any, client).pubsub()  # typed in redis.asyncio, untyped in redis
    return node_pubsub(client)


def node_pubsub(client: Any) -> Any:
    """Pub/sub on one node of a cluster, for cluster clients without `pubsub()`.

    redis-py before 8.0 offers no pub/sub on redis.asyncio.cluster.RedisCluster. A PUBLISH
    on Redis Cluster reaches every node, so a plain connection to any node hears it; it is
    made with that node's own connection settings (TLS, ACL user, timeouts).
    """
    node = client.get_default_node() or client.get_nodes()[0]
    settings = {**node.connection_kwargs, "host": node.host, "port": node.port}
    pool = redis.asyncio.ConnectionPool(connection_class=node.connection_class, **settings)
    # The pool goes with the pub/sub object: nothing else holds it.
    return cast(Any, redis.asyncio.Redis(connection_pool=pool)).pubsub()


async def _close(pubsub: Any) -> None:
    # Closing a broken connection may fail again; there is nothing left to do then.
    with contextlib.suppress(Exception):
        await pubsub.aclose()


_registry = ScopedRegistry()


def get_waker(client: AsyncClient) -> AsyncWaker:
    """The waker for `client` in the running event loop."""
    return _registry.get(async_scope(), client, lambda: AsyncWaker(client))
