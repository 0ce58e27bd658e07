"""Argument checks shared by every primitive: fail at construction, saying what was expected."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Any, TypeAlias

import redis
import redis.asyncio
import redis.asyncio.client
import redis.asyncio.cluster
import redis.client
import redis.cluster

Client: TypeAlias = "redis.Redis | redis.cluster.RedisCluster"
AsyncClient: TypeAlias = "redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster"

_SYNC = (redis.Redis, redis.cluster.RedisCluster)
_ASYNC = (redis.asyncio.Redis, redis.asyncio.cluster.RedisCluster)
# Pipelines subclass the clients (all but the asyncio cluster one), so they pass the
# isinstance checks above; every command they get is buffered until execute() and
# answered with the pipeline itself, so nothing seawall does could work through one.
_PIPELINES = (
    redis.client.Pipeline,
    redis.cluster.ClusterPipeline,
    redis.asyncio.client.Pipeline,
    redis.asyncio.cluster.ClusterPipeline,
)


def _refuse_pipeline(client: Any, what: str) -> None:
    if isinstance(client, _PIPELINES):
        raise TypeError(
            f"seawall {what} got a redis-py {type(client).__qualname__}, not a client: a "
            "pipeline only buffers commands until execute(), and seawall runs its own "
            "commands and scripts; pass the client itself (r, not r.pipeline())"
        )


def decodes_responses(client: Client | AsyncClient) -> bool:
    """Whether `client` was made with decode_responses=True (its replies are str)."""
    return bool(client.get_encoder().decode_responses)


def is_cluster(client: Any) -> bool:
    """Whether `client` is a Redis Cluster client (sync or asyncio)."""
    return isinstance(client, (redis.cluster.RedisCluster, redis.asyncio.cluster.RedisCluster))


def check_client(client: Any, what: str) -> Client:
    _refuse_pipeline(client, what)
    if isinstance(client, _SYNC):
        return client
    if isinstance(client, _ASYNC):
        raise TypeError(
            f"seawall.{what} needs a sync client (redis.Redis or redis.cluster.RedisCluster); "
            f"got {type(client).__module__}.{type(client).__qualname__}: "
            f"use seawall.aio.{what} with asyncio clients"
        )
    raise TypeError(
        f"seawall.{what} needs a redis-py client (redis.Redis or redis.cluster.RedisCluster), "
        f"got {type(client).__qualname__}: create one with redis.Redis.from_url(url)"
    )


def check_async_client(client: Any, what: str) -> AsyncClient:
    _refuse_pipeline(client, what)
    if isinstance(client, _ASYNC):
        return client
    if isinstance(client, _SYNC):
        raise TypeError(
            f"seawall.aio.{what} needs an asyncio client (redis.asyncio.Redis or "
            f"redis.asyncio.cluster.RedisCluster); got {type(client).__qualname__}: "
            f"use seawall.{what} with sync clients"
        )
    raise TypeError(
        f"seawall.aio.{what} needs a redis-py asyncio client (redis.asyncio.Redis or "
        f"redis.asyncio.cluster.RedisCluster), got {type(client).__qualname__}: "
        f"create one with redis.asyncio.Redis.from_url(url)"
    )


def check_name(name: Any, what: str) -> str:
    if not isinstance(name, str):
        raise TypeError(f"{what} name must be a str, got {type(name).__qualname__}: {name!r}")
    if not name:
        raise ValueError(f"{what} name must not be empty")
    return name


# Far beyond any sensible lease, yet small enough for every timer the waits go through.
MAX_SECONDS = 1e9


def check_seconds(value: Any, what: str, *, minimum: float = 0.001) -> float:
    """A positive, finite number of seconds (at least `minimum`: Redis expires in ms)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(
            f"{what} must be a number of seconds (int or float), got {type(value).__qualname__}: "
            f"{value!r}"
        )
    if not math.isfinite(value) or not minimum <= value <= MAX_SECONDS:
        raise ValueError(
            f"{what} must be a finite number of seconds >= {minimum} and <= {MAX_SECONDS:g}, "
            f"got {value!r}"
        )
    return float(value)


def check_timeout(value: Any, what: str) -> float | None:
    """None (wait forever) or a finite number of seconds >= 0."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(
            f"{what} must be None or a number of seconds, got {type(value).__qualname__}: {value!r}"
        )
    if math.isnan(value) or value < 0:
        raise ValueError(f"{what} must be None or >= 0 seconds, got {value!r}")
    return None if math.isinf(value) else float(value)


def check_acquire_wait(
    blocking: Any, timeout: Any, default: float | None, label: Callable[[], str]
) -> float | None:
    """How long `acquire(blocking, timeout)` may wait (None: as long as it takes).

    Read as threading reads it: None is the object's own timeout, -1 is no limit, a
    timeout given to a non-blocking call or below 0 (other than -1) is a ValueError, and a
    finite one past threading.TIMEOUT_MAX an OverflowError. `label()` names the primitive
    in those errors (called only for a timeout given: most acquires give none).
    """
    if timeout is None:
        return default
    what = label()
    number = not isinstance(timeout, bool) and isinstance(timeout, int | float)
    if number and timeout == -1:
        return None
    if not blocking:
        raise ValueError(
            f"{what}: a non-blocking acquire takes no timeout, got timeout={timeout!r}; "
            "pass blocking=False alone, or blocking=True with the timeout"
        )
    if number and math.isfinite(timeout) and timeout > threading.TIMEOUT_MAX:
        raise OverflowError(
            f"{what}: timeout {timeout!r} is too large (at most {threading.TIMEOUT_MAX:g} "
            "seconds; None or -1 waits as long as it takes)"
        )
    if number and timeout < 0:
        raise ValueError(
            f"timeout of {what} must be >= 0 seconds, or -1 (or None) to wait as long as "
            f"it takes, got {timeout!r}"
        )
    return check_timeout(timeout, f"timeout of {what}")


def check_replicas(value: Any, what: str) -> int:
    """How many replicas must acknowledge a write: an int >= 0 (0: do not wait)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"{what} must be an int number of replicas (0 to not wait), got "
            f"{type(value).__qualname__}: {value!r}"
        )
    if value < 0:
        raise ValueError(f"{what} must be >= 0 (0 to not wait for replicas), got {value!r}")
    return value


def check_permits(value: Any, what: str) -> int:
    """A whole number of permits, at least 1."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"{what} must be an int (the number of permits), got {type(value).__qualname__}: "
            f"{value!r}"
        )
    if value < 1:
        raise ValueError(f"{what} must be at least 1 (the number of permits), got {value!r}")
    return value
