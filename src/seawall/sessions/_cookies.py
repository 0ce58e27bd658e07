"""Reading the session cookie from a Cookie header and writing Set-Cookie. No I/O."""

from __future__ import annotations

import time
from dataclasses import dataclass
from email.utils import formatdate
from typing import Literal

SameSite = Literal["lax", "strict", "none"]


@dataclass(frozen=True, slots=True)
class CookiePolicy:
    """How the session cookie is written. `secure=None`: Secure exactly when the request
    came over HTTPS (behind a TLS-terminating proxy, make the server see the scheme, e.g.
    uvicorn --proxy-headers, werkzeug's ProxyFix, or pass secure=True)."""

    name: str = "session"
    path: str = "/"
    domain: str | None = None
    secure: bool | None = None
    http_only: bool = True
    same_site: SameSite | None = "lax"
    partitioned: bool = False

    def __post_init__(self) -> None:
        if not self.name or any(c in self.name for c in ' ;,="\t\r\n'):
            raise ValueError(f"session cookie name {self.name!r} is not a valid cookie name")
        for what, value in (("path", self.path), ("domain", self.domain or "")):
            if any(c in value for c in ";,\r\n"):
                raise ValueError(f"session cookie {what} {value!r} holds a ; , or line break")
        if self.same_site not in ("lax", "strict", "none", None):
            raise ValueError(
                f"same_site={self.same_site!r}: use 'lax' (the default), 'strict', 'none' or None"
            )


def read(cookie_header: str, name: str) -> str | None:
    """The value of cookie `name` in a Cookie header (the first one, as browsers send the
    most specific path first), or None."""
    for part in cookie_header.split(";"):
        key, sep, value = part.strip().partition("=")
        if sep and key == name:
            return value.strip().strip('"')
    return None


def set_cookie(
    policy: CookiePolicy, value: str, max_age: int | None, https: bool, now: float | None = None
) -> str:
    """A Set-Cookie value that stores `value` for `max_age` seconds (0: delete it; None: a
    browser-session cookie, dropped when the browser closes). Expires is written beside
    Max-Age for clients that know only Expires."""
    parts = [f"{policy.name}={value}", f"Path={policy.path}"]
    if max_age is not None:
        parts.append(f"Max-Age={max_age}")
        if max_age == 0:
            parts.append("Expires=Thu, 01 Jan 1970 00:00:00 GMT")
        else:
            when = (time.time() if now is None else now) + max_age
            parts.append(f"Expires={formatdate(when, usegmt=True)}")
    if policy.domain:
        parts.append(f"Domain={policy.domain}")
    secure = https if policy.secure is None else policy.secure
    # Browsers drop SameSite=None and Partitioned cookies that are not Secure.
    if secure or policy.same_site == "none" or policy.partitioned:
        parts.append("Secure")
    if policy.http_only:
        parts.append("HttpOnly")
    if policy.same_site:
        parts.append(f"SameSite={policy.same_site.capitalize()}")
    if policy.partitioned:
        parts.append("Partitioned")
    return "; ".join(parts)


def delete_cookie(policy: CookiePolicy, https: bool) -> str:
    return set_cookie(policy, "", 0, https)
