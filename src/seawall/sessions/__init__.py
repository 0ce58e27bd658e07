"""Sessions shared by every process of a web app, stored in Redis.

    from seawall.sessions import SessionMiddleware            # Starlette, FastAPI (ASGI)
    from seawall.sessions.flask import RedisSessionInterface  # Flask (needs seawall[flask])

One hash per session, written as deltas; sliding and absolute expiry; regenerate() at
login; bind_user() and logout_everywhere(). See docs/sessions.md.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, overload

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster

from seawall.sessions._async.store import AsyncSessionStore
from seawall.sessions._options import DEFAULT_PREFIX, SessionOptions
from seawall.sessions._session import Session
from seawall.sessions._sync.store import SessionStore
from seawall.sessions.asgi import SessionMiddleware
from seawall.sessions.errors import (
    SessionClosed,
    SessionError,
    SessionTooLarge,
    SessionUnavailable,
    SessionValueError,
)

__all__ = [
    "Session",
    "SessionClosed",
    "SessionError",
    "SessionMiddleware",
    "SessionTooLarge",
    "SessionUnavailable",
    "SessionValueError",
    "logout_everywhere",
]


@overload
def logout_everywhere(
    client: redis.Redis | redis.cluster.RedisCluster, user_id: str | int, *, prefix: str = ...
) -> int: ...


@overload
def logout_everywhere(
    client: redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster,
    user_id: str | int,
    *,
    prefix: str = ...,
) -> Awaitable[int]: ...


def logout_everywhere(client: Any, user_id: str | int, *, prefix: str = DEFAULT_PREFIX) -> Any:
    """End every session bound to `user_id` (Session.bind_user) and return how many were
    live. With an asyncio client it returns an awaitable: `await logout_everywhere(r, 42)`.
    `prefix` is the middleware's or interface's prefix, if you changed it.

    One script ends the sessions and empties the index, so a login saved at the same
    moment is either ended or saved after the logout, never missed. A request of such a
    session still running may finish reading its session; its write finds the session
    gone and writes nothing, and its response sends no cookie (the next request drops
    it)."""
    options = SessionOptions(prefix=prefix)
    if isinstance(client, redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster):
        return AsyncSessionStore(client, options).logout_everywhere(user_id)
    if isinstance(client, redis.Redis | redis.cluster.RedisCluster):
        return SessionStore(client, options).logout_everywhere(user_id)
    raise TypeError(f"logout_everywhere needs a redis-py client, got {type(client).__qualname__}")
