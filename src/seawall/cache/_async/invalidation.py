"""L1 invalidation broadcast: one pub/sub listener per client, per process (or event loop).

A cache keeps a local copy (L1) of what it read from Redis. When any process changes or
deletes a key, it publishes a message (format in `seawall.cache._invalidation_message`); every
process's listener drops that key from its registered L1s. Pub/sub delivers nothing while a
connection is down, so whenever the listener's connection is lost (an error, a hidden
reconnect by redis-py, or silence past `DEAD_AFTER` after a PING) every registered L1 is
cleared at once and `generation` moves on; it then reconnects by itself.

A value read from Redis may be overtaken by a write whose invalidation arrives before the
value is put in L1; putting it then would keep it stale. The owner of an L1 therefore takes
`snapshot(namespace, key)` before reading Redis and fills L1 only if `unchanged(snapshot)`:
that is False once anything that could concern the key (its discard, a clear of the
namespace, a lost connection) happened meanwhile, or when not listening. A discard that
arrives after the fill removes the value as usual.

The listener also carries each namespace's generation (see Cache.clear()): a clear's
message names the new one, and a generation read from Redis is kept for as long as the
subscription it was read under lasts. `known_generation` answers only while subscribed,
and forgets everything whenever messages may have been missed (as the L1s are cleared), so
a generation it gives is the one Redis holds, but for messages still on their way. A
cache with its L1 off registers an L1 of size 0, for the generations only: while every
registered L1 is such, the listener subscribes to clears alone, not to every write's
discard, and subscribes to those too (a new connection) once an L1 that keeps entries
is registered.

The listener also hears announcements of second deletes ("seawall:again:*", see
again.py) and passes them to the hooks registered with `on_again`, with (None, 0) each time
its subscription is complete again (at start and after any loss), as some may have been
missed.

L1s are held weakly; the listener stops once none is left.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
import weakref
from collections.abc import Callable
from typing import Any, Literal, NamedTuple, Protocol

from seawall.cache import _invalidation_message as message_format
from seawall.locks._async.waker import open_pubsub
from seawall.shared import _concurrency
from seawall.shared._concurrency import (
    AsyncEvent,
    AsyncWorker,
    ScopedRegistry,
    async_raise_if_cancelled,
    async_scope,
    async_sleep,
)
from seawall.shared._validate import AsyncClient, check_async_client, check_name

# How long one read waits before the listener looks at its health and registrations.
POLL = 0.25
# After this much silence the listener sends a PING; no reply within DEAD_AFTER more means a
# dead connection (a peer that vanished without closing it).
PING_AFTER = 1.0
DEAD_AFTER = 1.0
RECONNECT_BACKOFF = 0.05
# Discards are counted per bucket of keys for `unchanged`: a discard of another key in the
# same bucket only costs one skipped L1 fill, and the memory stays fixed.
BUCKETS = 4096


class Snapshot(NamedTuple):
    """What `unchanged` compares against; taken by `snapshot` before a read from Redis."""

    generation: int  # -1 when taken while not listening: never unchanged
    namespace: str
    clears: int
    bucket: int
    discards: int


class L1(Protocol):
    """What the invalidator needs from a local cache. Sync L1s are called from the
    listener thread, so they must be thread-safe."""

    def discard(self, key: str) -> None: ...

    def clear(self) -> None: ...


class AsyncInvalidator:
    """Delivers invalidations to this process's L1s; `get_invalidator(client)` gives it."""

    def __init__(self, client: AsyncClient) -> None:
        # Weak: the registry is keyed by the client; a strong reference would keep it alive.
        self._client = weakref.ref(client)
        self.id = uuid.uuid4().hex  # the sender id in messages this process publishes
        self._mutex = threading.Lock()
        self._l1s: dict[str, dict[int, weakref.ref[Any]]] = {}
        self._worker: AsyncWorker | None = None
        self._listening = AsyncEvent()
        self.generation = 0  # moves on each time every L1 was cleared (a lost connection)
        self._clears: dict[str, int] = {}  # per namespace, for `unchanged`
        self._discards = [0] * BUCKETS
        self.received = 0  # messages from other processes (or other invalidators) applied
        # Moves on with each new subscription and whenever messages may have been missed:
        # a generation read under an older session is not kept (see learn_generation).
        self._session = 0
        self._generations: dict[str, int] = {}  # namespace -> generation, this session
        self._highest: dict[str, int] = {}  # namespace -> highest generation ever seen here
        self._discards_wanted = False  # an L1 that keeps entries was registered
        self._subscribed: tuple[str, ...] = ()  # the patterns of the current connection
        # (namespace or None, seconds until due) -> None: second-delete sweepers
        self._again_hooks: list[Callable[[str | None, float], None]] = []

    def __repr__(self) -> str:
        state = "listening" if self.listening else "not listening"
        return f"<seawall.Invalidator {self.id[:8]} {state} generation={self.generation}>"

    @property
    def listening(self) -> bool:
        """True while subscribed: an L1 may be filled only then."""
        return self._listening.is_set()

    def register(self, namespace: str, l1: L1) -> None:
        """Deliver invalidations of `namespace` to `l1` (held weakly); starts the listener."""
        check_name(namespace, "invalidation namespace")
        if not (callable(getattr(l1, "discard", None)) and callable(getattr(l1, "clear", None))):
            raise TypeError(
                f"an L1 registered for invalidation of {namespace!r} needs discard(key) and "
                f"clear() methods, got {type(l1).__qualname__}"
            )
        with self._mutex:
            l1s = self._l1s.setdefault(namespace, {})
            l1s[id(l1)] = weakref.ref(l1, self._forget(namespace, id(l1)))
            if getattr(l1, "max_entries", None) != 0 and not self._discards_wanted:
                self._discards_wanted = True
                if not self._hears_all(self._subscribed):
                    self._deaf()  # until subscribed to the discards as well (see _run)
            if self._worker is None or not self._worker.alive():
                self._deaf()
                self._worker = AsyncWorker(self._run, "seawall-invalidation")

    def _forget(self, namespace: str, ident: int) -> Any:
        def forget(ref: weakref.ref[Any]) -> None:
            with self._mutex:
                l1s = self._l1s.get(namespace)
                if l1s is not None and l1s.get(ident) is ref:
                    del l1s[ident]
                    if not l1s:
                        del self._l1s[namespace]

        return forget

    def on_again(self, hook: Callable[[str | None, float], None]) -> None:
        """Call `hook(namespace, seconds)` for each announced second delete, and
        `hook(None, 0.0)` whenever announcements may have been missed (registered once)."""
        with self._mutex:
            if hook not in self._again_hooks:
                self._again_hooks.append(hook)
        if self.listening:
            hook(None, 0.0)  # it may have missed some before it was registered

    def _tell_again(self, namespace: str | None, seconds: float) -> None:
        with self._mutex:
            hooks = list(self._again_hooks)
        for hook in hooks:
            try:
                hook(namespace, seconds)
            except Exception:
                _concurrency.log.exception("second-delete hook %r raised", hook)

    def unregister(self, namespace: str, l1: L1) -> None:
        with self._mutex:
            l1s = self._l1s.get(namespace, {})
            ref = l1s.get(id(l1))
            if ref is not None and ref() is l1:
                del l1s[id(l1)]
                if not l1s:
                    self._l1s.pop(namespace, None)

    async def wait_listening(self, timeout: float) -> bool:
        """Wait until the listener is subscribed; False if it was not within `timeout`."""
        return await self._listening.wait(timeout)

    async def publish(self, namespace: str, key: str, *, skip: L1 | None = None) -> None:
        """Drop `key` from every L1 of `namespace`: this process's at once (all but `skip`,
        which the caller keeps up to date itself), other processes' through Redis."""
        self.discard_local(namespace, key, skip=skip)
        await self._publish(namespace, message_format.encode(self.id, message_format.DISCARD, key))

    async def publish_clear(self, namespace: str, *, skip: L1 | None = None) -> None:
        """Empty every L1 of `namespace`, here and in every other process."""
        self.clear_local(namespace, skip=skip)
        await self._publish(namespace, message_format.encode(self.id, message_format.CLEAR))

    async def _publish(self, namespace: str, body: str) -> None:
        client = self._client()
        if client is None:
            raise RuntimeError("the Redis client of this invalidator was closed and collected")
        await client.publish(message_format.channel(namespace), body)

    def _targets(self, namespace: str | None, skip: object = None) -> list[Any]:
        with self._mutex:
            groups = self._l1s.values() if namespace is None else [self._l1s.get(namespace, {})]
            found = [ref() for group in groups for ref in group.values()]
        return [l1 for l1 in found if l1 is not None and l1 is not skip]

    # --- the generations of cache namespaces (see the module's docstring) ----------------

    def known_generation(self, namespace: str) -> int | None:
        """The namespace's generation, if it can be trusted without asking Redis (a hit
        asks this: one dict lookup, as _generations is empty while not listening)."""
        return self._generations.get(namespace)

    def generation_token(self) -> int | None:
        """Taken before reading a generation from Redis, for learn_generation."""
        with self._mutex:
            return self._session if self._listening.is_set() else None

    def learn_generation(self, namespace: str, generation: int, token: int | None) -> None:
        """Keep a generation read from Redis (or issued by our own clear) if the listener
        was subscribed before the read (`token`) and has missed nothing since: any clear
        after the read then reaches it as a message."""
        with self._mutex:
            self._highest[namespace] = max(self._highest.get(namespace, 0), generation)
            if token is not None and token == self._session and self._listening.is_set():
                known = self._generations.get(namespace, generation)
                self._generations[namespace] = max(known, generation)

    def highest_generation(self, namespace: str) -> int:
        """The highest generation of `namespace` this listener ever saw (0: none): Redis
        holding a lower one means its key was lost (see Cache._generation_read)."""
        with self._mutex:
            return self._highest.get(namespace, 0)

    def _announced(self, namespace: str, generation: int) -> None:
        """A clear's message: the generation it names is current from now on. Kept
        before the L1s are emptied: a read that sees the emptied L1 sees it too."""
        with self._mutex:
            self._highest[namespace] = max(self._highest.get(namespace, 0), generation)
            if self._listening.is_set():
                known = self._generations.get(namespace, generation)
                self._generations[namespace] = max(known, generation)

    def _new_session(self) -> None:
        with self._mutex:
            self._session += 1
            self._generations.clear()

    def _patterns(self) -> tuple[str, ...]:
        heard = (message_format.CLEARED_PATTERN, message_format.AGAIN_PATTERN)
        if self._discards_wanted:
            return (*heard, message_format.PATTERN)
        return heard

    def _hears_all(self, patterns: tuple[str, ...]) -> bool:
        """Whether a connection subscribed to `patterns` hears all that is wanted now."""
        return not self._discards_wanted or message_format.PATTERN in patterns

    def _deaf(self) -> None:
        """Not listening from now on (called holding the mutex): no generation is known."""
        self._listening.clear()
        self._session += 1
        self._generations.clear()

    def snapshot(self, namespace: str, key: str) -> Snapshot:
        """Take before reading `key` from Redis; fill L1 afterwards only if `unchanged`."""
        bucket = hash((namespace, key)) % BUCKETS
        with self._mutex:
            return Snapshot(
                self.generation if self._listening.is_set() else -1,
                namespace,
                self._clears.get(namespace, 0),
                bucket,
                self._discards[bucket],
            )

    def unchanged(self, snapshot: Snapshot) -> bool:
        """True if still listening and nothing that could concern the key happened since."""
        with self._mutex:
            return (
                snapshot.generation == self.generation
                and self._listening.is_set()
                and snapshot.clears == self._clears.get(snapshot.namespace, 0)
                and snapshot.discards == self._discards[snapshot.bucket]
            )

    def discard_local(self, namespace: str, *keys: str, skip: L1 | None = None) -> None:
        """Drop `keys` from this process's L1s of `namespace` (a script published already)."""
        with self._mutex:
            for key in keys:  # before the drop: a fill racing it must see it
                self._discards[hash((namespace, key)) % BUCKETS] += 1
        for l1 in self._targets(namespace, skip):
            for key in keys:
                _apply(l1, "discard", key)

    def clear_local(self, namespace: str | None = None, *, skip: L1 | None = None) -> None:
        """Empty this process's L1s of `namespace` (of every namespace when None)."""
        with self._mutex:
            if namespace is None:
                self.generation += 1
                self._session += 1  # messages may have been missed: read generations again
                self._generations.clear()
            else:
                self._clears[namespace] = self._clears.get(namespace, 0) + 1
        for l1 in self._targets(namespace, skip):
            _apply(l1, "clear")

    def _lost(self, why: str) -> None:
        """Messages may have been missed: nothing an L1 holds can be trusted any more."""
        was_listening = self.listening
        with self._mutex:
            self._deaf()
        self.clear_local()  # moves `generation` on
        if was_listening:
            _concurrency.log.info("invalidation listener lost its connection: %s", why)

    def _on_message(self, message: dict[str, Any]) -> None:
        if message["type"] != "pmessage":
            return
        decoded = message_format.decode(message["channel"], message["data"])
        if decoded is not None and decoded.op == message_format.AGAIN:
            # Our own too: another client's sweeper in this process may serve it.
            self._tell_again(decoded.namespace, message_format.due_in(decoded) or 0.0)
        elif decoded is None:
            self.clear_local()  # unreadable: it may have named any key
        elif decoded.sender != self.id:  # our own were applied locally when published
            self.received += 1
            if decoded.op == message_format.DISCARD:
                self.discard_local(decoded.namespace, decoded.key)
            elif decoded.op == message_format.DISCARD_MANY:
                self.discard_local(decoded.namespace, *decoded.keys)
            else:
                generation = message_format.generation(decoded)
                if generation is not None:
                    self._announced(decoded.namespace, generation)
                self.clear_local(decoded.namespace)

    def _idle(self) -> bool:
        """True (and the listener is detached) once no L1 is registered."""
        with self._mutex:
            if self._l1s:
                return False
            self._worker = None
            self._deaf()
            return True

    async def _open(self) -> Any:
        client = self._client()
        if client is None:
            return None
        # An asyncio cluster client learns its slots on first use; its pub/sub needs them,
        # and the listener may well be the first user. (Sync clients have no such step.)
        initialize = getattr(client, "initialize", None)
        if initialize is not None:
            await initialize()
        pubsub = open_pubsub(client)
        with self._mutex:
            self._subscribed = self._patterns()
        await pubsub.psubscribe(*self._subscribed)
        return pubsub

    async def _run(self) -> None:
        pubsub: Any = None
        acks = 0
        heard = ping_sent = 0.0
        try:
            while True:
                if self._idle():
                    return
                if pubsub is not None and not self._hears_all(self._subscribed):
                    # An L1 that keeps entries came: hear every write's discard too, from
                    # a connection subscribed to both (the listener is deaf meanwhile).
                    await _close(pubsub)
                    pubsub = None
                if pubsub is None:
                    try:
                        pubsub = await self._open()
                    except Exception as exc:
                        async_raise_if_cancelled()
                        _concurrency.log.debug("invalidation cannot connect: %r", exc)
                        await async_sleep(RECONNECT_BACKOFF)
                        continue
                    if pubsub is None:  # the client is gone
                        with self._mutex:
                            self._worker = None
                        return
                    acks = 0
                    heard = _concurrency.monotonic()
                    ping_sent = 0.0
                try:
                    message = await pubsub.get_message(timeout=POLL)
                    async_raise_if_cancelled()  # a cancelled read can end as "no message"
                    now = _concurrency.monotonic()
                    if message is None:
                        if ping_sent and now - ping_sent > DEAD_AFTER:
                            raise ConnectionError(f"no reply to a PING within {DEAD_AFTER}s")
                        if not ping_sent and now - heard > PING_AFTER:
                            await pubsub.ping()
                            ping_sent = now
                        continue
                except Exception as exc:
                    async_raise_if_cancelled()
                    # Not only ConnectionError: a client closed under us fails in the parser.
                    self._lost(repr(exc))
                    await _close(pubsub)
                    pubsub = None
                    await async_sleep(RECONNECT_BACKOFF)
                    continue
                heard = now
                ping_sent = 0.0
                if message["type"] == "psubscribe":
                    acks += 1
                    patterns = len(self._subscribed)
                    if acks > patterns and acks % patterns == 1 % patterns:
                        # redis-py reconnected and subscribed again by itself: what was
                        # published in between is lost.
                        self._lost("the connection was re-established")
                    elif acks == patterns:
                        self._new_session()
                    if acks % patterns == 0:
                        with self._mutex:
                            complete = self._hears_all(self._subscribed)
                            if complete:
                                self._listening.set()
                        if complete:
                            self._tell_again(None, 0.0)  # announcements may have been missed
                else:
                    self._on_message(message)
        finally:
            with self._mutex:
                self._deaf()
            if pubsub is not None:
                await _close(pubsub)


def _apply(l1: Any, method: Literal["discard", "clear"], *args: str) -> None:
    try:
        getattr(l1, method)(*args)
    except Exception:
        _concurrency.log.exception("%s() of L1 %r raised", method, l1)


async def _close(pubsub: Any) -> None:
    # Closing a broken connection may fail again; there is nothing left to do then.
    with contextlib.suppress(Exception):
        await pubsub.aclose()


_registry = ScopedRegistry()


def get_invalidator(client: Any) -> AsyncInvalidator:
    """The invalidator for `client` in this process (in the running event loop for asyncio)."""
    checked = check_async_client(client, "Cache")
    return _registry.get(async_scope(), checked, lambda: AsyncInvalidator(checked))
