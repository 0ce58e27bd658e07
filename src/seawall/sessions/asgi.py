"""ASGI middleware: `request.session` in Starlette and FastAPI, stored in Redis.

Plain ASGI, no Starlette import: the session is put in scope["session"], where
Starlette's `request.session` (and FastAPI's) finds it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from datetime import timedelta
from typing import Any

from redis.asyncio import Redis as AsyncRedis
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster

from seawall.sessions import _cookies
from seawall.sessions._async.store import AsyncSessionStore
from seawall.sessions._options import Serializer, make_options
from seawall.sessions._plan import response_cookie
from seawall.sessions._session import Session, check_client

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class SessionMiddleware:
    """Sessions shared by every process of the app, in Redis.

        app.add_middleware(SessionMiddleware, redis=redis.asyncio.Redis(...))

    One round trip loads a session (and slides its expiry); one more saves what the
    request changed, when the response starts. A request that fails before its response
    starts writes nothing. See docs/sessions.md.
    """

    def __init__(
        self,
        app: ASGIApp,
        redis: Any,
        *,
        prefix: str = "seawall:session",
        max_age: float | timedelta = 14 * 86_400,
        absolute_lifetime: float | timedelta = 30 * 86_400,
        max_size: int = 64 * 1024,
        serializer: str | Serializer = "json",
        cookie_name: str = "session",
        path: str = "/",
        domain: str | None = None,
        secure: bool | None = None,
        http_only: bool = True,
        same_site: str | None = "lax",
        partitioned: bool = False,
        browser_session: bool = False,
    ) -> None:
        self.app = app
        client = check_client(
            redis,
            (AsyncRedis, AsyncRedisCluster),
            "seawall.sessions.SessionMiddleware",
            "a redis-py asyncio client (redis.asyncio.Redis.from_url(url)); Flask apps "
            "use seawall.sessions.flask.RedisSessionInterface with a sync client",
        )
        self.options = make_options(
            prefix=prefix,
            max_age=max_age,
            absolute_lifetime=absolute_lifetime,
            max_size=max_size,
            serializer=serializer,
            cookie_name=cookie_name,
            path=path,
            domain=domain,
            secure=secure,
            http_only=http_only,
            same_site=same_site,
            partitioned=partitioned,
            browser_session=browser_session,
        )
        self.store = AsyncSessionStore(client, self.options)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        cookie = _cookies.read(_header(scope, b"cookie"), self.options.cookie.name)
        # No cookie can be set on a WebSocket: its session is read, never changed.
        session = await self.store.load(cookie, writable=scope["type"] == "http")
        scope["session"] = session
        https = scope.get("scheme") in ("https", "wss")

        async def send_with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start":
                header = await self._save(session, https)
                if header is not None or session.accessed:
                    headers = _vary_cookie(list(message.get("headers", [])))
                    if header is not None:
                        headers.append((b"set-cookie", header.encode("latin-1")))
                    message["headers"] = headers
            await send(message)

        try:
            await self.app(scope, receive, send_with_cookie)
        finally:
            session.close()

    async def _save(self, session: Session, https: bool) -> str | None:
        if session.closed:  # a second response start cannot happen; be safe anyway
            return None
        plan = await self.store.save(session)
        return response_cookie(session, plan, https)


def _vary_cookie(headers: list[Any]) -> list[Any]:
    """`headers` with Cookie in Vary: the response depends on the session, so a shared
    cache must not serve it to another visitor."""
    for i, (name, value) in enumerate(headers):
        if bytes(name).lower() == b"vary":
            listed = [v.strip().lower() for v in bytes(value).split(b",")]
            if b"cookie" not in listed and b"*" not in listed:
                headers[i] = (name, bytes(value) + b", Cookie")
            return headers
    headers.append((b"vary", b"Cookie"))
    return headers


def _header(scope: Scope, name: bytes) -> str:
    values = [v.decode("latin-1") for k, v in scope.get("headers", []) if k.lower() == name]
    return "; ".join(values)
