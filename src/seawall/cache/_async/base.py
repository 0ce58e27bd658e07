"""State of one seawall.aio.Cache: settings, the L1 and its invalidation, the namespace's
generation, encoding, and the Redis calls, counted by the optional circuit breaker.

Entry keys carry the namespace's generation (see _codec.cache_keys and
Cache.clear()). A process names entries with the generation its invalidation listener
keeps (no I/O: a hit stays one MGET), and reads it from Redis only while that listener is
not subscribed, or has missed messages since it last knew it.
"""

from __future__ import annotations

import functools
import math
import threading
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisClusterException, RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeout

from seawall.cache import _invalidation_message as message_format
from seawall.cache._async.again import get_sweeper
from seawall.cache._async.invalidation import AsyncInvalidator, get_invalidator
from seawall.cache._breaker import CircuitBreaker, RateLimiter
from seawall.cache._codec import (
    ABSENT_PAYLOAD,
    CacheKeys,
    Serializer,
    cache_key,
    cache_keys,
    canonical,
    encode,
    generation_key,
    parse_generation,
)
from seawall.cache._freshness import hit_lead, jittered
from seawall.cache._hotkeys import HotKeys
from seawall.cache._l1 import L1, MISSING
from seawall.cache._stats import Counters
from seawall.errors import CacheWaitTimeout
from seawall.metrics._sink import SINK as metrics_sink
from seawall.shared import _concurrency, _direct, _scripts
from seawall.shared._async.scripts import run_script
from seawall.shared._bounded import async_time_limit
from seawall.shared._concurrency import (
    AsyncSlots,
    ScopedRegistry,
    async_scope,
    async_spawn,
)
from seawall.shared._keys import tagged
from seawall.shared._validate import AsyncClient, check_seconds

_FETCH = _scripts.load("seawall.cache", "cache_fetch")
_STORE = _scripts.with_prelude("cache_write", _scripts.load("seawall.cache", "cache_store"))
_STORE_MANY = _scripts.with_prelude(
    "cache_write", _scripts.load("seawall.cache", "cache_store_many")
)
_VOID = _scripts.load("seawall.cache", "cache_void")

# A payload that could not be decoded (distinct from None, "not found").
CORRUPT: Any = object()


# Connections a process may hold from the client's pool for pub/sub: the L1 invalidation
# listener and the load wake-ups. The cache's own commands use the rest.
PUBSUB_CONNECTIONS = 2
# A pool at least this large is unbounded in practice (redis-py's default is 2**31).
UNBOUNDED_POOL = 2**30

# The connection slots of each bounded pool, per process (per event loop in asyncio).
_pool_slots = ScopedRegistry()


# How many of its hottest keys each process publishes per cache (`seawall hotkeys`).
HOT_PUBLISHED = 20


def ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


class RedisUnavailable(Exception):
    """The circuit breaker is open: Redis is not called (internal; the cache degrades)."""


# What a Redis call raises when Redis is unreachable, frozen or not called (breaker open).
# RedisClusterException is not a RedisError: a cluster client raises it when no node
# answers while it looks for the slots' owners again.
REDIS_DOWN = (RedisUnavailable, RedisError, RedisClusterException, OSError, TimeoutError)


def stored_payload(stored: Any) -> bytes | None:
    """The payload of a stored value key (`<stale window>:<load time>:<payload>`); None if
    there is none or it was not written by seawall."""
    if stored is None:
        return None
    if isinstance(stored, str):  # a client with decode_responses=True
        stored = stored.encode()
    header = stored.split(b":", 2)
    return header[2] if len(header) == 3 else None


class AsyncCacheBase:
    """State of one seawall.aio.Cache: settings, L1, invalidation, encoding, Redis calls."""

    def __init__(
        self,
        client: AsyncClient,
        namespace: str,
        *,
        ttl: float,
        stale_ttl: float,
        absent_ttl: float,
        jitter: float,
        lease: float,
        wait_timeout: float,
        xfetch_beta: float | None,
        serializer: Serializer,
        l1: L1,
        bloom: Any,
        breaker: CircuitBreaker | None,
        loader_limit: RateLimiter | None,
        hot: HotKeys | None = None,
    ) -> None:
        self._client = client
        self.namespace = namespace
        self.ttl = ttl
        self.stale_ttl = stale_ttl
        self.absent_ttl = absent_ttl
        self.jitter = jitter
        self.lease = lease
        self.wait_timeout = wait_timeout
        self.xfetch_beta = xfetch_beta
        self._serializer = serializer
        self.l1 = l1
        self._counters = Counters(namespace)
        self._hot = hot
        # Where this process publishes its hot keys for `seawall hotkeys` (see hot_keys()).
        self._hot_key = f"{tagged('hotkeys', namespace)}:{uuid.uuid4().hex[:12]}"
        metrics_sink.caches.add(self)  # its breaker's state is exported while it lives
        self._mutex = threading.Lock()
        self.bloom = bloom
        self.breaker = breaker
        self.loader_limit = loader_limit
        self._invalidator: tuple[object, AsyncInvalidator] | None = None
        self._slots_cached: tuple[object, AsyncSlots | None] | None = None
        # How long (ms) our L1 keeps an entry (0: off); a plain hit's lead must cover it.
        self._l1_ms = math.ceil(l1.ttl * 1000) if l1.max_entries else 0
        # The Bloom filter's failure was logged (again only once it has worked meanwhile).
        self._bloom_warned = False

    # --- the L1 and the invalidation broadcast -------------------------------------------

    def _invalidator_here(self) -> AsyncInvalidator:
        """This process's invalidation listener, with our L1 registered: also one of size
        0 (L1 off), as the listener carries the namespace's generation too."""
        here = async_scope()
        cached = self._invalidator
        if cached is None or cached[0] is not here:
            invalidator = get_invalidator(self._client)
            invalidator.register(self.namespace, self.l1)
            cached = self._invalidator = (here, invalidator)
        return cached[1]

    def _listener(self) -> AsyncInvalidator | None:
        """The invalidation listener, for our L1 (None: L1 off)."""
        if self.l1.max_entries == 0:
            return None
        return self._invalidator_here()

    def _fill_epoch(self) -> int | None:
        """Taken before a read: the L1 may be filled with its result only if not None.

        Only while the listener is subscribed (else an invalidation could be missed) and
        only if nothing was invalidated meanwhile (checked by L1.put).
        """
        listener = self._listener()
        if listener is None or not listener.listening:
            return None
        return self.l1.epoch

    def _invalidation(self, key: str | None) -> tuple[str, str]:
        """(channel, message) a write publishes so every process drops `key` from its L1
        (None: everything of this namespace)."""
        # The listener runs with the L1 off too (it carries the generation): as its own,
        # our messages cost it no more than a glance.
        sender = self._invalidator_here().id
        if key is None:
            body = message_format.encode(sender, message_format.CLEAR)
        else:
            body = message_format.encode(sender, message_format.DISCARD, key)
        return message_format.channel(self.namespace), body

    def _invalidations(self, keys: list[str]) -> tuple[str, str]:
        """(channel, message) a write publishes so every process drops all of `keys`."""
        sender = self._invalidator_here().id
        return message_format.channel(self.namespace), message_format.encode_many(sender, keys)

    def _dropped_here(self, *keys: str) -> None:
        """Other L1s of this namespace in this process (our own messages skip them)."""
        self._invalidator_here().discard_local(self.namespace, *keys, skip=self.l1)

    def _bloom_failed(self, exc: Exception, doing: str) -> None:
        """Log a failing Bloom filter once, not on every miss while it stays broken."""
        if self._bloom_warned:
            return
        self._bloom_warned = True
        _concurrency.log.warning(
            "cache %r: the Bloom filter failed (%s); %s. Logged once until it works again",
            self.namespace,
            exc,
            doing,
        )

    def _peek(self, text: str) -> Any:
        """What the L1 holds for `text` (MISSING if nothing), counted, the read offered to
        the hot-key sketch: a read's first step, with no I/O."""
        hot = self._hot
        if hot is not None:
            hot.skip -= 1  # HotKeys.offer, inlined: most reads are not sampled
            if hot.skip <= 0 and hot.sample(text):
                self._publish_hot_keys()
        found = self.l1.get(text)
        if found is not MISSING:
            self._counters.add("l1_hits" if found is not None else "absent_hits")
        return found

    # --- Redis: a fresh hit is a plain read ----------------------------------------------

    async def _hit(self, key: str) -> Any:
        """The value if Redis holds it fresh (one MGET, no script), else MISSING.

        Value and hit marker both present means the entry is fresh for at least the lead
        the marker holds (see cache_store.lua): an L1 no longer-lived than that may keep
        it, XFetch would not draw yet. Anything else (a miss, a stale or corrupt value,
        the last `lead` of the fresh time) goes the load path, whose script elects
        loaders and refreshers.
        """
        epoch = self._fill_epoch()  # before the generation: see _new_generation
        keys = self._known_keys(key) or await self._read_keys(key)
        stored, lead = await self._read(keys.read)
        return self._plain_hit(key, stored, lead, epoch)

    def _plain_hit(self, key: str, stored: Any, lead: Any, epoch: int | None) -> Any:
        """What a plain read of `key`'s value and hit marker answers (see _hit): the value
        (None for an absent one) if fresh, counted and kept in the L1; else MISSING."""
        if lead is None:
            return MISSING
        payload = stored_payload(stored)
        if payload is None:
            return MISSING  # none, or not written by seawall: the load path decides
        if epoch is not None and int(lead) < self._l1_ms:
            # Our L1 would keep it longer than the writer's lead vouches for: the script
            # tells the exact time left, and the L1 then saves the following reads.
            return MISSING
        if payload == ABSENT_PAYLOAD:
            self._counters.add("absent_hits")
            value = None
        else:
            try:
                value = self._serializer.loads(payload)
            except Exception:
                return MISSING  # the load path counts, logs and replaces it
            self._counters.add("l2_hits")
        if epoch is not None:
            self.l1.put(key, value, None, epoch)
        return value

    # --- the namespace's generation (see the module's docstring) ------------------------

    def _known_keys(self, key: str) -> CacheKeys | None:
        """The keys of `key`'s entry, if the listener knows the generation (no I/O)."""
        generation = self._invalidator_here().known_generation(self.namespace)
        return None if generation is None else cache_keys(self.namespace, key, generation)

    async def _read_keys(self, key: str) -> CacheKeys:
        return cache_keys(self.namespace, key, await self._generation_read())

    async def _generation(self) -> int:
        known = self._invalidator_here().known_generation(self.namespace)
        return known if known is not None else await self._generation_read()

    if TYPE_CHECKING:  # AsyncCacheGenerations's (generation.py)

        async def _generation_seen(self, generation: int, token: int | None) -> int: ...

        async def _drop_everywhere(self, texts: list[str]) -> None: ...

    async def _generation_read(self, *, guarded: bool = True) -> int:
        """The generation as Redis holds it now (one GET); kept while the listener can."""
        invalidator = self._invalidator_here()
        token = invalidator.generation_token()
        key = generation_key(self.namespace)
        # Through _direct, as the reads are: often a cache's first command, and a plain
        # client on a Cluster node is named there (see _direct.wrong_client).
        read = functools.partial(_direct.async_run, self._client, ("GET", key))
        reply = await self._held((key,), read, guarded)
        return await self._generation_seen(parse_generation(reply), token)

    def _lead(self, took: float) -> int:
        """The lead (ms) a write gives its hit marker; see _freshness.hit_lead."""
        return math.ceil(hit_lead(self._l1_ms / 1000, self.xfetch_beta, took) * 1000)

    # --- encoding ------------------------------------------------------------------------

    def _key(self, key: Any) -> str:
        return cache_key(key, self.namespace)

    def _ttl(self, ttl: Any) -> float | None:
        return None if ttl is None else check_seconds(ttl, f"ttl of cache {self.namespace!r}")

    def _encoded(self, value: Any, key: str) -> tuple[Any, bytes]:
        """(the value every reader gets, its payload): CacheSerializationError if `value`
        cannot be encoded, so nothing is written and no caller gets another type."""
        payload = encode(self._serializer, value, self.namespace, key)
        return canonical(self._serializer, value, payload), payload

    def _decode(self, payload: Any, key: str) -> Any:
        data = payload.encode() if isinstance(payload, str) else bytes(payload)
        if data == ABSENT_PAYLOAD:
            return None
        try:
            return self._serializer.loads(data)
        except Exception as exc:
            self._counters.add("corrupt")
            _concurrency.log.warning(
                "cache %r: the value of key %r in Redis cannot be decoded (%r); "
                "treating it as a miss and loading it again",
                self.namespace,
                key,
                exc,
            )
            return CORRUPT

    def _entry_ttls(self, value: Any, ttl: float | None) -> tuple[float, float]:
        """(fresh seconds, stale window seconds) for a value about to be written."""
        if value is None:
            return jittered(self.absent_ttl if ttl is None else ttl, self.jitter), 0.0
        return jittered(self.ttl if ttl is None else ttl, self.jitter), self.stale_ttl

    def _remember(self, key: str, value: Any, fresh: float, epoch: int | None) -> None:
        if epoch is not None:
            self.l1.put(key, value, fresh, epoch)

    # --- hot keys --------------------------------------------------------------------------

    def hot_keys(self, n: int = 20) -> list[tuple[Any, float]]:
        """This process's hottest keys of this cache: (key text, reads/s, roughly), the
        hottest first. Empty when the cache was made with hot_keys=0."""
        if self._hot is None:
            return []
        return [(key, self._hot.rate(count)) for key, count in self._hot.top(n)]

    def _publish_hot_keys(self) -> None:
        """Publish the top keys (once per half-life) for `seawall hotkeys`: a sorted set per
        process and namespace, key text -> reads/s, expiring unless published again."""
        top = self.hot_keys(HOT_PUBLISHED)
        if self.breaker is not None and self.breaker.state != "closed":
            return  # Redis is away: the next half-life publishes again
        if top:
            async_spawn(
                functools.partial(self._write_hot_keys, top),
                f"publishing the hot keys of cache {self.namespace!r}",
            )

    async def _write_hot_keys(self, top: list[tuple[Any, float]]) -> None:
        assert self._hot is not None
        lifetime = ms(3 * self._hot.half_life)
        pipe = self._client.pipeline(transaction=False)
        pipe.delete(self._hot_key)
        pipe.zadd(self._hot_key, {key: rate for key, rate in top})
        pipe.pexpire(self._hot_key, lifetime)
        try:
            await pipe.execute()
        except REDIS_DOWN as exc:
            # Only a report for `seawall hotkeys`: the next half-life publishes again.
            _concurrency.log.debug("publishing hot keys failed: %r", exc)

    # --- Redis calls -------------------------------------------------------------------------

    def _slots(self) -> AsyncSlots | None:
        """Slots for this process's cache commands on a pool with `max_connections`: callers
        beyond it wait for a free connection instead of failing with redis-py's "Too many
        connections". None for unbounded pools and cluster clients (a pool per node).

        Its first call in a process (or event loop), the cache's first use there, also has
        this process carry out the namespace's second deletes (see again.py)."""
        here = async_scope()
        cached = self._slots_cached
        if cached is None or cached[0] is not here:
            get_sweeper(self._client).register(self)
            pool = getattr(self._client, "connection_pool", None)
            size = getattr(pool, "max_connections", None)
            slots = None
            if isinstance(size, int) and size < UNBOUNDED_POOL:
                count = max(1, size - PUBSUB_CONNECTIONS)
                slots = _pool_slots.get(here, pool, lambda: AsyncSlots(count))
            cached = self._slots_cached = (here, slots)
        return cached[1]

    async def _take(self, slots: AsyncSlots, keys: Sequence[str]) -> None:
        if not await slots.acquire(self.wait_timeout):
            raise CacheWaitTimeout(
                f"cache {self.namespace!r}: no connection of the client's pool was free for "
                f"wait_timeout={self.wait_timeout} s (key {keys[0]!r}); raise the pool's "
                "max_connections or lower the number of concurrent callers",
                key=keys[0],
            )

    async def _command(
        self, script: _scripts.LuaScript, keys: Sequence[str], args: Sequence[Any]
    ) -> Any:
        """Run a script holding a connection slot (see _slots); no breaker."""
        slots = self._slots()
        if slots is None:
            return await run_script(self._client, script, keys, args)
        if not slots.take_now():
            await self._take(slots, keys)
        try:
            return await run_script(self._client, script, keys, args)
        finally:
            slots.release()

    async def _redis(
        self, script: _scripts.LuaScript, keys: Sequence[str], args: Sequence[Any]
    ) -> Any:
        """Run a script; with a breaker, only while it allows, each call bounded in time."""
        if self.breaker is None:
            return await self._command(script, keys, args)
        return await self._guarded(keys, lambda: run_script(self._client, script, keys, args))

    async def _read(self, keys: Sequence[str]) -> Any:
        """One MGET of `keys` (one hash tag: one node, one slot): a fresh hit's plain read,
        held to the same slots and breaker as the scripts.

        Sent as a command, not with redis-py's mget(): its argument handling cost about
        1.7 us a call, as much as the server's work for the second key and more; and on the
        direct path where it fits (seawall.shared._direct), as the scripts are.
        """
        client: Any = self._client  # the sync client's execute_command is untyped
        if self.breaker is None:
            slots = self._slots()
            if slots is None:
                return await _direct.async_run(client, ("MGET", *keys))
            if not slots.take_now():  # a free slot, the usual case: no coroutine
                await self._take(slots, keys)
            try:
                return await _direct.async_run(client, ("MGET", *keys))
            finally:
                slots.release()
        return await self._guarded(keys, lambda: _direct.async_run(client, ("MGET", *keys)))

    async def _held(self, keys: Sequence[str], call: Callable[[], Any], guarded: bool) -> Any:
        """`call()` holding a connection slot; under the breaker too if `guarded`."""
        if guarded and self.breaker is not None:
            return await self._guarded(keys, call)
        slots = self._slots()
        if slots is None:
            return await call()
        await self._take(slots, keys)
        try:
            return await call()
        finally:
            slots.release()

    async def _guarded(self, keys: Sequence[str], call: Callable[[], Any]) -> Any:
        """`call()` under the breaker: only while it allows, bounded in time, counted."""
        breaker = self.breaker
        assert breaker is not None
        slots = self._slots()
        # Taken before the breaker is asked and the time limit starts: a wait for a free
        # connection is congestion here, not a sign that Redis is down.
        if slots is not None and not slots.take_now():  # a free slot, usually: no coroutine
            await self._take(slots, keys)
        try:
            if not breaker.allow():
                raise RedisUnavailable(f"circuit open for cache {self.namespace!r}")
            try:
                async with async_time_limit(breaker.call_timeout):
                    reply = await call()
            except ResponseError:
                breaker.success()  # an error reply: Redis itself is alive
                raise
            except Exception as exc:
                breaker.failure(timed_out=isinstance(exc, TimeoutError | RedisTimeout))
                raise
            breaker.success()
            return reply
        finally:
            if slots is not None:
                slots.release()
