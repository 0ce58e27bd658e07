"""The options of seawall.django.RedisCache beyond Django's: an in-process L1 kept right
across processes (`l1_size`, `l1_ttl`) and a circuit breaker (`breaker`).

Both are seawall.Cache's own parts (seawall.cache._l1, its invalidation listener, its
CircuitBreaker), shared by the cache instances of one process (see _local). Without
them (the default) every call goes straight to the store.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Hashable, Iterable
from typing import Any, TypeVar

import redis
import redis.cluster
from django.core.exceptions import ImproperlyConfigured
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisClusterException
from redis.exceptions import TimeoutError as RedisTimeout

from seawall import CircuitBreaker
from seawall.django._local import MISSING, LocalLevel, shared
from seawall.errors import CacheUnavailable

log = logging.getLogger("seawall")

_T = TypeVar("_T")

# What a call raises when Redis is unreachable or frozen: counted by the breaker, and
# answered by the fallback. (An error reply, a ResponseError, means Redis is alive.)
REDIS_DOWN = (RedisConnectionError, RedisTimeout, RedisClusterException, OSError, TimeoutError)

BREAKER_OPTIONS = ("failure_threshold", "open_for", "call_timeout")


# What a call answers while Redis is down (the breaker open, or no reply): Django's "not
# there", "not done".
def answer_false() -> bool:
    return False


def answer_none() -> None:
    return None


def answer_empty() -> dict[str, Any]:
    return {}


DOWN_PTTL = -3  # a PTTL no reply has: Redis did not answer


def answer_nothing() -> tuple[None, int]:
    return None, DOWN_PTTL


DOWN_VALUE: Any = object()


def answer_down() -> Any:
    """DOWN_VALUE: the caller then answers by itself (an async loader to await)."""
    return DOWN_VALUE


def answer_unavailable(what: str) -> Callable[[], Any]:
    """A fallback raising CacheUnavailable: nothing can stand in for the answer."""

    def fail() -> Any:
        raise CacheUnavailable(
            f"{what}: Redis does not answer (seawall.django.RedisCache's breaker is open); "
            "there is nothing to answer in its place"
        )

    return fail


def _breaker_settings(value: Any) -> dict[str, Any] | None:
    if value is None or value is False:
        return None
    if value is True:
        return {}
    if isinstance(value, dict) and set(value) <= set(BREAKER_OPTIONS):
        return dict(value)
    raise ImproperlyConfigured(
        f"OPTIONS['breaker'] must be True or a dict of {', '.join(BREAKER_OPTIONS)} "
        f"(seawall.CircuitBreaker's arguments), got {value!r}"
    )


class Extras:
    """Reads OPTIONS' l1_size, l1_ttl and breaker (removing them); runs the backend's
    calls through the breaker and keeps the L1 right."""

    def __init__(self, options: dict[str, Any], location: Hashable, make_client: Any) -> None:
        size = options.pop("l1_size", 0)
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ImproperlyConfigured(
                f"OPTIONS['l1_size'] must be an int >= 0 (0: no L1), got {size!r}"
            )
        ttl = options.pop("l1_ttl", 5.0)
        if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not ttl > 0:
            raise ImproperlyConfigured(f"OPTIONS['l1_ttl'] must be seconds > 0, got {ttl!r}")
        self.l1_ttl = float(ttl)
        breaker = _breaker_settings(options.pop("breaker", None))
        if breaker is not None:
            # Each call is bounded by the socket, so a frozen Redis opens the breaker
            # within call_timeout (unless a socket timeout of your own is set).
            bound = CircuitBreaker(**breaker).call_timeout
            options.setdefault("socket_timeout", bound)
            options.setdefault("socket_connect_timeout", bound)
        where = (location, repr(sorted(options.items())))
        self._l1_key = ("l1", where, size, self.l1_ttl) if size else None
        self._l1_size = size
        self._breaker_key = ("breaker", where, repr(sorted(breaker.items()))) if breaker else None
        self._breaker_settings = breaker or {}
        self._make_client = make_client

    # --- the shared parts ---------------------------------------------------------------

    def local(self) -> LocalLevel | None:
        if self._l1_key is None:
            return None
        return shared(
            self._l1_key,
            lambda: LocalLevel(
                self._make_client(redis.Redis, redis.cluster.RedisCluster),
                self._l1_size,
                self.l1_ttl,
            ),
        )

    def breaker(self) -> CircuitBreaker | None:
        if self._breaker_key is None:
            return None
        return shared(
            self._breaker_key,
            lambda: CircuitBreaker(**self._breaker_settings, name="seawall.django.RedisCache"),
        )

    # --- calls ------------------------------------------------------------------------

    def guarded(self, call: Callable[[], _T], fallback: Callable[[], _T]) -> _T:
        """call(); with a breaker, fallback() instead while it is open or when Redis
        does not answer."""
        breaker = self.breaker()
        if breaker is None:
            return call()
        if not breaker.allow():
            return fallback()
        try:
            result = call()
        except REDIS_DOWN as exc:
            breaker.failure(timed_out=isinstance(exc, RedisTimeout | TimeoutError))
            log.debug("seawall.django.RedisCache: Redis did not answer: %r", exc)
            return fallback()
        except BaseException:
            breaker.success()
            raise
        breaker.success()
        return result

    async def aguarded(self, call: Callable[[], Awaitable[_T]], fallback: Callable[[], _T]) -> _T:
        breaker = self.breaker()
        if breaker is None:
            return await call()
        if not breaker.allow():
            return fallback()
        try:
            result = await call()
        except REDIS_DOWN as exc:
            breaker.failure(timed_out=isinstance(exc, RedisTimeout | TimeoutError))
            log.debug("seawall.django.RedisCache: Redis did not answer: %r", exc)
            return fallback()
        except BaseException:
            breaker.success()
            raise
        breaker.success()
        return result

    def stale_or(self, key: str, default: Any, loads: Callable[[bytes], Any]) -> Any:
        """Redis down: this process's L1 copy of `key` up to l1_ttl past its expiry, or
        `default`."""
        local = self.local()
        if local is not None:
            raw = local.get_stale(key, self.l1_ttl)
            if raw is not MISSING:
                return loads(raw)
        return default

    def changed(self, store: Any, keys: Iterable[str]) -> None:
        """After a write of `keys`: dropped from every process's L1 (here at once)."""
        local = self.local()
        if local is not None:
            message = local.dropped(keys)
            self.guarded(lambda: store.publish(message), lambda: None)

    async def achanged(self, store: Any, keys: Iterable[str]) -> None:
        local = self.local()
        if local is not None:
            message = local.dropped(keys)
            await self.aguarded(lambda: store.publish(message), lambda: None)

    def cleared(self, store: Any) -> None:
        local = self.local()
        if local is not None:
            message = local.cleared()
            self.guarded(lambda: store.publish(message), lambda: None)

    async def acleared(self, store: Any) -> None:
        local = self.local()
        if local is not None:
            message = local.cleared()
            await self.aguarded(lambda: store.publish(message), lambda: None)
