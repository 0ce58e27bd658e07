"""State of one seawall.aio.Cache: settings, the L1 and its invalidation, encoding, and
the Redis calls, counted by the optional circuit breaker."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence
from typing import Any

from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeout

from seawall import _concurrency, _scripts
from seawall import _invalidation_message as message_format
from seawall._async.invalidation import AsyncInvalidator, get_invalidator
from seawall._async.scripts import run_script
from seawall._breaker import CircuitBreaker, RateLimiter
from seawall._cache_codec import ABSENT_PAYLOAD, Serializer
from seawall._cache_stats import Counters
from seawall._concurrency import AsyncGate, ScopedRegistry, async_scope, async_time_limit
from seawall._freshness import jittered
from seawall._l1 import L1
from seawall._validate import AsyncClient

_FETCH = _scripts.load("cache_fetch")
_STORE = _scripts.load("cache_store")
_VOID = _scripts.load("cache_void")

# A payload that could not be decoded (distinct from None, "not found").
CORRUPT: Any = object()


def ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


class RedisUnavailable(Exception):
    """The circuit breaker is open: Redis is not called (internal; the cache degrades)."""


# Connections a bounded pool keeps for the cache's two pub/sub listeners (wake-ups and
# invalidations), which take theirs from the same pool.
PUBSUB_RESERVE = 2
# A pool allowing more connections than this is taken as unbounded (redis-py's default).
UNBOUNDED_POOL = 1 << 20

_gates = ScopedRegistry()


def pool_limit(client: Any) -> int | None:
    """How many cache calls may use `client` at once: its pool's bound, less what the
    listeners take; None when the pool is unbounded (or per node, on Cluster)."""
    pool = getattr(client, "connection_pool", None)
    limit = getattr(pool, "max_connections", None)
    if not isinstance(limit, int) or limit >= UNBOUNDED_POOL:
        return None
    return max(1, limit - PUBSUB_RESERVE)


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
        self._counters = Counters()
        self._mutex = threading.Lock()
        self.bloom = bloom
        self.breaker = breaker
        self.loader_limit = loader_limit
        self._invalidator: tuple[object, AsyncInvalidator] | None = None
        # Sender id of invalidations published when no listener runs here (L1 off).
        self._sender = uuid.uuid4().hex
        # With a bounded pool (max_connections=), callers beyond its size queue here
        # instead of failing with "Too many connections" (per process or event loop).
        self._limit = pool_limit(client)
        self._cached_gate: tuple[object, AsyncGate] | None = None

    # --- the L1 and the invalidation broadcast -------------------------------------------

    def _listener(self) -> AsyncInvalidator | None:
        """This process's invalidation listener, with our L1 registered (None: L1 off)."""
        if self.l1.max_entries == 0:
            return None
        here = async_scope()
        cached = self._invalidator
        if cached is None or cached[0] is not here:
            invalidator = get_invalidator(self._client)
            invalidator.register(self.namespace, self.l1)
            cached = self._invalidator = (here, invalidator)
        return cached[1]

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
        listener = self._listener()
        sender = self._sender if listener is None else listener.id
        if key is None:
            body = message_format.encode(sender, message_format.CLEAR)
        else:
            body = message_format.encode(sender, message_format.DISCARD, key)
        return message_format.channel(self.namespace), body

    def _dropped_here(self, key: str) -> None:
        """Other L1s of this namespace in this process (our own messages skip them)."""
        listener = self._listener()
        if listener is not None:
            listener.discard_local(self.namespace, key, skip=self.l1)

    # --- encoding ------------------------------------------------------------------------

    def _decode(self, payload: Any, key: str) -> Any:
        data = payload.encode() if isinstance(payload, str) else bytes(payload)
        if data == ABSENT_PAYLOAD:
            return None
        try:
            return self._serializer.loads(data)
        except Exception as exc:
            self._counters.add("corrupt")
            _concurrency.log.warning(
                "seawall: cache %r: the value of key %r in Redis cannot be decoded (%r); "
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

    # --- Redis calls -------------------------------------------------------------------------

    def _gate(self) -> AsyncGate | None:
        limit = self._limit
        if limit is None:
            return None
        here = async_scope()
        cached = self._cached_gate
        if cached is None or cached[0] is not here:
            gate = _gates.get(here, self._client, lambda: AsyncGate(limit))
            cached = self._cached_gate = (here, gate)
        return cached[1]

    async def _run(
        self, script: _scripts.LuaScript, keys: Sequence[str], args: Sequence[Any]
    ) -> Any:
        """Run a script, waiting for a free connection when the pool is bounded."""
        gate = self._gate()
        if gate is None:
            return await run_script(self._client, script, keys, args)
        async with gate:
            return await run_script(self._client, script, keys, args)

    async def _redis(
        self, script: _scripts.LuaScript, keys: Sequence[str], args: Sequence[Any]
    ) -> Any:
        """Run a script; with a breaker, only while it allows, each call bounded in time."""
        breaker = self.breaker
        if breaker is None:
            return await self._run(script, keys, args)
        if not breaker.allow():
            raise RedisUnavailable(f"circuit open for cache {self.namespace!r}")
        try:
            async with async_time_limit(breaker.call_timeout):
                reply = await self._run(script, keys, args)
        except ResponseError:
            breaker.success()  # an error reply: Redis itself is alive
            raise
        except Exception as exc:
            breaker.failure(timed_out=isinstance(exc, TimeoutError | RedisTimeout))
            raise
        breaker.success()
        return reply
