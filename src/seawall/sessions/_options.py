"""A session store's settings and its serializer. No I/O."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol

from seawall.cache._codec import PickleSerializer  # the cache's: one opt-in pickle
from seawall.sessions._cookies import CookiePolicy

DEFAULT_PREFIX = "seawall:session"


class Serializer(Protocol):
    def dumps(self, value: Any) -> bytes: ...

    def loads(self, data: bytes) -> Any: ...


class JsonSerializer:
    """Strict JSON: NaN and infinities are refused (other languages reading the session
    could not parse them); tuples come back as lists, as JSON has no tuple."""

    def dumps(self, value: Any) -> bytes:
        return json.dumps(
            value, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        ).encode()

    def loads(self, data: bytes) -> Any:
        return json.loads(data)


def serializer_of(choice: str | Serializer) -> Serializer:
    if choice == "json":
        return JsonSerializer()
    if choice == "pickle":
        return PickleSerializer()
    if isinstance(choice, str):
        raise ValueError(
            f"serializer={choice!r}: use 'json' (the default), 'pickle', or an object with "
            "dumps(value) -> bytes and loads(bytes)"
        )
    if not (callable(getattr(choice, "dumps", None)) and callable(getattr(choice, "loads", None))):
        raise TypeError(f"serializer {choice!r} needs dumps(value) -> bytes and loads(bytes)")
    return choice


def _seconds(value: Any, what: str) -> float:
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise TypeError(f"session {what} must be a number of seconds or a timedelta, got {value!r}")
    if value < 1:
        raise ValueError(f"session {what} must be at least 1 second, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class SessionOptions:
    """max_age: a session unused this long ends (sliding: every request that loads it
    starts the count again). absolute_lifetime: no session id lives longer, however
    busy (a regenerated id starts its own). max_size: bytes of field names and
    serialized values together. browser_session: the cookie has no Max-Age or Expires
    (the browser drops it when it closes; Redis still ends the session after max_age
    unused). refresh_cookie: a request that changes nothing re-sends a persistent cookie
    once half its Max-Age has passed, so the browser's expiry slides with Redis'."""

    prefix: str = DEFAULT_PREFIX
    max_age: float = 14 * 86_400
    absolute_lifetime: float = 30 * 86_400
    max_size: int = 64 * 1024
    serializer: Serializer = field(default_factory=JsonSerializer)
    cookie: CookiePolicy = field(default_factory=CookiePolicy)
    browser_session: bool = False
    refresh_cookie: bool = True

    def __post_init__(self) -> None:
        # A timedelta is accepted and kept as seconds.
        object.__setattr__(self, "max_age", _seconds(self.max_age, "max_age"))
        object.__setattr__(
            self, "absolute_lifetime", _seconds(self.absolute_lifetime, "absolute_lifetime")
        )
        if isinstance(self.max_size, bool) or not isinstance(self.max_size, int):
            raise TypeError(f"session max_size must be a number of bytes, got {self.max_size!r}")
        if self.max_size < 1:
            raise ValueError(f"session max_size must be at least 1 byte, got {self.max_size}")
        if not self.prefix or "{" in self.prefix or "}" in self.prefix:
            raise ValueError(
                f"session prefix {self.prefix!r} must be non-empty, without braces (the "
                "session's id provides the hash tag)"
            )

    @property
    def max_age_ms(self) -> int:
        return int(self.max_age * 1000)

    @property
    def lifetime_ms(self) -> int:
        return int(self.absolute_lifetime * 1000)

    @property
    def cookie_max_age(self) -> int:
        return int(min(self.max_age, self.absolute_lifetime))


def make_options(
    *,
    prefix: str = DEFAULT_PREFIX,
    max_age: float | timedelta = 14 * 86_400,
    absolute_lifetime: float | timedelta = 30 * 86_400,
    max_size: int = 64 * 1024,
    serializer: str | Serializer = "json",
    cookie_name: str = "session",
    path: str = "/",
    domain: str | None = None,
    secure: bool | None = None,
    http_only: bool = True,
    same_site: Any = "lax",
    partitioned: bool = False,
    browser_session: bool = False,
    refresh_cookie: bool = True,
) -> SessionOptions:
    """The options shared by the ASGI middleware and the Flask interface, as keywords."""
    return SessionOptions(
        prefix=prefix,
        max_age=_seconds(max_age, "max_age"),
        absolute_lifetime=_seconds(absolute_lifetime, "absolute_lifetime"),
        max_size=max_size,
        serializer=serializer_of(serializer),
        browser_session=browser_session,
        refresh_cookie=refresh_cookie,
        cookie=CookiePolicy(
            name=cookie_name,
            path=path,
            domain=domain,
            secure=secure,
            http_only=http_only,
            same_site=same_site,
            partitioned=partitioned,
        ),
    )
