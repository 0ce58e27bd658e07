"""Flask's `session`, stored in Redis: `app.session_interface = RedisSessionInterface(r)`.

Needs the `seawall[flask]` extra. `r` is a sync redis-py client (redis.Redis or
redis.cluster.RedisCluster). Same storage, ids and cookie as the ASGI middleware, so a
Flask app and a Starlette app given the same prefix and cookie name share sessions.
"""

from __future__ import annotations

from typing import Any

from redis import Redis as SyncRedis
from redis.cluster import RedisCluster as SyncRedisCluster

try:
    from flask import Flask, Request, Response
    from flask.sessions import SessionInterface, SessionMixin
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("seawall.sessions.flask needs Flask: pip install 'seawall[flask]'") from exc

from seawall.sessions._options import Serializer, make_options
from seawall.sessions._session import Session, check_client, response_cookie
from seawall.sessions._sync.store import SessionStore


class FlaskSession(Session, SessionMixin):
    """A seawall Session that Flask accepts as its `session`."""

    # Flask reads these; changes are found by comparing bytes (see _session), so the
    # `modified` flag only matters to code that sets it by hand.
    modified = False
    accessed = True

    @property
    def permanent(self) -> bool:
        # Every session has a persistent cookie (max_age); Flask's flag changes nothing.
        return True

    @permanent.setter
    def permanent(self, value: bool) -> None:
        pass


class RedisSessionInterface(SessionInterface):
    """Flask sessions in Redis. One round trip loads the session (and slides its expiry)
    when Flask opens it at the request's start; one more saves the request's changes in
    `save_session`, which Flask runs for every response it builds, error handlers'
    included (an unhandled exception's 500 writes nothing). See docs/sessions.md."""

    def __init__(
        self,
        redis: Any,
        *,
        prefix: str = "seawall:session",
        max_age: float = 14 * 86_400,
        absolute_lifetime: float = 30 * 86_400,
        max_size: int = 64 * 1024,
        serializer: str | Serializer = "json",
        cookie_name: str = "session",
        path: str = "/",
        domain: str | None = None,
        secure: bool | None = None,
        http_only: bool = True,
        same_site: str | None = "lax",
    ) -> None:
        client = check_client(
            redis,
            (SyncRedis, SyncRedisCluster),
            "seawall.sessions.flask.RedisSessionInterface",
            "a sync redis-py client (redis.Redis.from_url(url)); asyncio apps use "
            "seawall.sessions.SessionMiddleware",
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
        )
        self.store = SessionStore(client, self.options, session_class=FlaskSession)

    def open_session(self, app: Flask, request: Request) -> FlaskSession:
        session = self.store.load(request.cookies.get(self.options.cookie.name))
        assert isinstance(session, FlaskSession)
        return session

    def save_session(self, app: Flask, session: SessionMixin, response: Response) -> None:
        if not isinstance(session, Session) or session.closed:
            return
        plan = self.store.save(session)
        header = response_cookie(session, plan, _is_https())
        if header is not None:
            response.headers.add("Set-Cookie", header)
            # The response depends on the cookie: shared caches must not serve it to others.
            response.vary.add("Cookie")


def _is_https() -> bool:
    from flask import request

    return bool(request.is_secure)
