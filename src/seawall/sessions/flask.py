"""Flask's `session`, stored in Redis: `app.session_interface = RedisSessionInterface(r)`.

Needs the `seawall[flask]` extra. `r` is a sync redis-py client (redis.Redis or
redis.cluster.RedisCluster). Same storage, ids and cookie as the ASGI middleware, so a
Flask app and a Starlette app given the same prefix and cookie name share sessions.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from redis import Redis as SyncRedis
from redis.cluster import RedisCluster as SyncRedisCluster

try:
    from flask import Flask, Request, Response
    from flask.json.tag import TaggedJSONSerializer
    from flask.sessions import SessionInterface, SessionMixin
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("seawall.sessions.flask needs Flask: pip install 'seawall[flask]'") from exc

from seawall.sessions._options import Serializer, SessionOptions, make_options, serializer_of
from seawall.sessions._plan import response_cookie
from seawall.sessions._session import Session, check_client
from seawall.sessions._sync.store import SessionStore

# A keyword left out: app.config, then seawall's default, decide.
_UNSET: Any = object()

# seawall's defaults, where Flask's differ (safer: SameSite=Lax, Secure on HTTPS, 14 days).
_DEFAULTS: dict[str, Any] = {
    "max_age": 14 * 86_400,
    "cookie_name": "session",
    "path": "/",
    "domain": None,
    "secure": None,
    "http_only": True,
    "same_site": "lax",
    "partitioned": False,
    "refresh_cookie": True,
}


# The config keys that _from_config reads.
_CONFIG_KEYS = (
    "SESSION_COOKIE_NAME",
    "SESSION_COOKIE_DOMAIN",
    "SESSION_COOKIE_PATH",
    "SESSION_COOKIE_HTTPONLY",
    "SESSION_COOKIE_SECURE",
    "SESSION_COOKIE_SAMESITE",
    "SESSION_COOKIE_PARTITIONED",
    "SESSION_REFRESH_EACH_REQUEST",
    "PERMANENT_SESSION_LIFETIME",
    "APPLICATION_ROOT",
)


class FlaskJsonSerializer:
    """Flask's tagged JSON (flask.json.tag), the format of Flask's own cookie sessions:
    tuples, bytes, Markup, UUIDs and datetimes come back as they went in (a flashed
    (category, Markup) pair stays one). Plain JSON values are written as plain JSON, so
    an ASGI app sharing the sessions reads them as they are."""

    def __init__(self) -> None:
        self._tagged = TaggedJSONSerializer()

    def dumps(self, value: Any) -> bytes:
        return self._tagged.dumps(value).encode()

    def loads(self, data: bytes) -> Any:
        return self._tagged.loads(data.decode())


class FlaskSession(Session, SessionMixin):
    """A seawall Session that Flask accepts as its `session`. `accessed`, `modified` and
    `permanent` behave as in Flask; saving does not depend on `modified` (changes are
    found by comparing bytes), so a value changed in place is saved too."""

    @property
    def new(self) -> bool:  # type: ignore[override]
        return self.is_new


def _from_config(app: Flask) -> dict[str, Any]:
    """The session settings this app's config sets: the keys whose value differs from
    Flask's default (Flask's config holds every key, set or not)."""
    config, flask_default = app.config, Flask.default_config

    def given(key: str) -> bool:
        return key in config and config[key] != flask_default.get(key)

    found: dict[str, Any] = {}
    simple = {
        "SESSION_COOKIE_NAME": "cookie_name",
        "SESSION_COOKIE_DOMAIN": "domain",
        "SESSION_COOKIE_HTTPONLY": "http_only",
        "SESSION_COOKIE_SECURE": "secure",
        "SESSION_COOKIE_PARTITIONED": "partitioned",
        "SESSION_REFRESH_EACH_REQUEST": "refresh_cookie",
        "PERMANENT_SESSION_LIFETIME": "max_age",
    }
    for key, option in simple.items():
        if given(key):
            found[option] = config[key]
    if given("SESSION_COOKIE_SAMESITE"):
        value = config["SESSION_COOKIE_SAMESITE"]
        found["same_site"] = value.lower() if isinstance(value, str) else value
    # Flask's rule: SESSION_COOKIE_PATH, else APPLICATION_ROOT.
    if config.get("SESSION_COOKIE_PATH"):
        found["path"] = config["SESSION_COOKIE_PATH"]
    elif given("APPLICATION_ROOT"):
        found["path"] = config["APPLICATION_ROOT"]
    if isinstance(found.get("max_age"), int | float) and not isinstance(found["max_age"], bool):
        found["max_age"] = timedelta(seconds=found["max_age"])
    return found


class RedisSessionInterface(SessionInterface):
    """Flask sessions in Redis. One round trip loads the session (and slides its expiry)
    when Flask opens it at the request's start; one more saves the request's changes in
    `save_session`, which Flask runs for every response it builds, error handlers'
    included (an unhandled exception's 500 writes nothing). See docs/sessions.md.

    Cookie and lifetime settings: a keyword given here wins; else the app's Flask config
    (SESSION_COOKIE_*, PERMANENT_SESSION_LIFETIME, APPLICATION_ROOT,
    SESSION_REFRESH_EACH_REQUEST) where it differs from Flask's default; else seawall's
    default."""

    def __init__(
        self,
        redis: Any,
        *,
        prefix: str = "seawall:session",
        max_age: float | timedelta = _UNSET,
        absolute_lifetime: float | timedelta = 30 * 86_400,
        max_size: int = 64 * 1024,
        serializer: str | Serializer = "json",
        cookie_name: str = _UNSET,
        path: str = _UNSET,
        domain: str | None = _UNSET,
        secure: bool | None = _UNSET,
        http_only: bool = _UNSET,
        same_site: str | None = _UNSET,
        partitioned: bool = _UNSET,
        browser_session: bool = False,
    ) -> None:
        self.client = check_client(
            redis,
            (SyncRedis, SyncRedisCluster),
            "seawall.sessions.flask.RedisSessionInterface",
            "a sync redis-py client (redis.Redis.from_url(url)); asyncio apps use "
            "seawall.sessions.SessionMiddleware",
        )
        given = {
            "max_age": max_age,
            "cookie_name": cookie_name,
            "path": path,
            "domain": domain,
            "secure": secure,
            "http_only": http_only,
            "same_site": same_site,
            "partitioned": partitioned,
        }
        self._given = {name: value for name, value in given.items() if value is not _UNSET}
        self._fixed: dict[str, Any] = {
            "prefix": prefix,
            "absolute_lifetime": absolute_lifetime,
            "max_size": max_size,
            "serializer": FlaskJsonSerializer()
            if serializer == "json"
            else serializer_of(serializer),
            "browser_session": browser_session,
        }
        # Checked now: a bad keyword fails at start-up, not at the first request.
        self.options = make_options(**self._fixed, **{**_DEFAULTS, **self._given})
        self._stores: dict[tuple[Any, ...], SessionStore] = {}

    def options_for(self, app: Flask) -> SessionOptions:
        """The options for a request of `app`: keywords, then its config, then seawall's."""
        return self._store_for(app).options

    def _store_for(self, app: Flask) -> SessionStore:
        # Read at every request (Flask lets the config change at run time); the options
        # are built once per distinct set of values.
        key = tuple(repr(app.config.get(name)) for name in _CONFIG_KEYS)
        store = self._stores.get(key)
        if store is None:
            chosen = {**_DEFAULTS, **_from_config(app), **self._given}
            options = make_options(**self._fixed, **chosen)
            store = SessionStore(self.client, options, session_class=FlaskSession)
            if len(self._stores) > 64:  # config changed at run time, over and over
                self._stores.clear()
            self._stores[key] = store
        return store

    def open_session(self, app: Flask, request: Request) -> FlaskSession:
        store = self._store_for(app)
        session = store.load(request.cookies.get(store.options.cookie.name))
        assert isinstance(session, FlaskSession)
        return session

    def save_session(self, app: Flask, session: SessionMixin, response: Response) -> None:
        if not isinstance(session, Session) or session.closed:
            return
        plan = self._store_for(app).save(session)
        header = response_cookie(session, plan, _is_https())
        # The response depends on the cookie: shared caches must not serve it to others.
        if header is not None or session.accessed:
            response.vary.add("Cookie")
        if header is not None:
            response.headers.add("Set-Cookie", header)


def _is_https() -> bool:
    from flask import request

    return bool(request.is_secure)
