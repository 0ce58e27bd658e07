"""The session object a request sees, its value checks, and how it is read from a load
script's reply. No I/O. What saving it writes is decided in _plan.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from seawall.sessions import _ids
from seawall.sessions._options import SessionOptions
from seawall.sessions.errors import SessionClosed, SessionTooLarge, SessionValueError
from seawall.shared._concurrency import log

DATA = "d:"
CREATED = "m:created"
USER = "m:user"
PERMANENT = "m:permanent"  # "1"/"0", only when set on the session (else the store's default)
ISSUED = "m:issued"  # when a response last carried the cookie (ms, server clock)


class Session(dict[str, Any]):
    """A dict of JSON values (by default), plus regenerate(), bind_user() and the id.

    A real dict (json.dumps and JSON responses take it as one), whose every way of
    changing it goes through the checks below. Keys are str. Setting a value serializes it
    at once, so a value the serializer refuses, or one that takes the session over its size
    limit, raises right there (SessionValueError, SessionTooLarge) with the field's name,
    and nothing is written. `accessed` and `modified` say whether the request read or
    changed it (as Flask's sessions do); saving does not need them (it compares bytes).
    """

    def __init__(
        self,
        options: SessionOptions,
        session_id: str | None = None,
        stored: dict[str, bytes] | None = None,
        user_id: str | None = None,
        *,
        sent_cookie: bool = False,
        writable: bool = True,
        permanent: bool | None = None,
        issued_ms: int | None = None,
    ) -> None:
        super().__init__()
        self._options = options
        self._id = session_id
        self._stored = dict(stored or {})
        for name, raw in list(self._stored.items()):
            try:
                dict.__setitem__(self, name, options.serializer.loads(raw))
            except Exception as exc:  # bytes from another serializer or a bad write
                # Dropped from the view (and removed from Redis if the session is saved):
                # a session field nobody can read must not fail every request of its user.
                log.warning("session field %r could not be read (%s); dropped", name, exc)
        self._sizes = {name: len(name.encode()) + len(self._stored[name]) for name in self._view()}
        self._stored_user = user_id
        self._user = user_id
        self._stored_permanent = permanent
        self._permanent = permanent
        self.issued_ms = issued_ms
        self._cleared = False
        self._regenerate = False
        self._closed = False
        self._writable = writable
        self.accessed = False
        self.modified = False
        # A cookie came with the request but named no live session: the response drops it.
        self.sent_dead_cookie = sent_cookie and session_id is None

    def _view(self) -> dict[str, Any]:
        """The values, read without marking the session accessed."""
        return dict(dict.items(self))

    # -- reading (marks the session accessed) -----------------------------------------

    def __getitem__(self, name: str) -> Any:
        self.accessed = True
        return dict.__getitem__(self, name)

    def get(self, name: str, default: Any = None) -> Any:
        self.accessed = True
        return dict.get(self, name, default)

    def __contains__(self, name: object) -> bool:
        self.accessed = True
        return dict.__contains__(self, name)

    def __iter__(self) -> Iterator[str]:
        self.accessed = True
        return dict.__iter__(self)

    def __len__(self) -> int:
        self.accessed = True
        return dict.__len__(self)

    def keys(self) -> Any:
        self.accessed = True
        return dict.keys(self)

    def values(self) -> Any:
        self.accessed = True
        return dict.values(self)

    def items(self) -> Any:
        self.accessed = True
        return dict.items(self)

    def copy(self) -> dict[str, Any]:
        self.accessed = True
        return dict(dict.items(self))

    # -- changing (every path is checked) ---------------------------------------------

    def __setitem__(self, name: str, value: Any) -> None:
        self._check_open()
        if not isinstance(name, str):
            raise TypeError(f"session keys are str, got {name!r}")
        raw = encode(self._options, name, value)
        size = len(name.encode()) + len(raw)
        total = sum(s for n, s in self._sizes.items() if n != name) + size
        check_size(self._options, total, name, size)
        dict.__setitem__(self, name, value)
        self._sizes[name] = size
        self.accessed = self.modified = True

    def __delitem__(self, name: str) -> None:
        self._check_open()
        dict.__delitem__(self, name)
        self._sizes.pop(name, None)
        self.accessed = self.modified = True

    _MISSING: Any = object()

    def pop(self, name: str, default: Any = _MISSING) -> Any:
        self.accessed = True
        if dict.__contains__(self, name):
            value = dict.__getitem__(self, name)
            del self[name]
            return value
        if default is Session._MISSING:
            raise KeyError(name)
        return default

    def popitem(self) -> tuple[str, Any]:
        self._check_open()
        name, value = dict.popitem(self)
        dict.__setitem__(self, name, value)
        del self[name]
        return name, value

    def setdefault(self, name: str, default: Any = None) -> Any:
        self.accessed = True
        if not dict.__contains__(self, name):
            self[name] = default
        return dict.__getitem__(self, name)

    def update(self, *args: Any, **kwargs: Any) -> None:
        for name, value in dict(*args, **kwargs).items():
            self[name] = value

    def __ior__(self, other: Any) -> Session:  # type: ignore[override,misc]
        self.update(other)
        return self

    def __repr__(self) -> str:
        return f"<seawall Session {dict.__repr__(self)}>"

    def __reduce__(self) -> Any:
        # A copy (pickle, copy.copy) is a plain dict of the values: a Session is bound to
        # its request.
        return (dict, (self._view(),))

    def clear(self) -> None:
        """Empty the session and unbind its user. Saved as one replacement: fields other
        requests set meanwhile go too. An empty session is deleted, with its cookie."""
        self._check_open()
        dict.clear(self)
        self._sizes.clear()
        self._user = None
        self._cleared = True
        self.accessed = self.modified = True

    # -- beyond a dict --------------------------------------------------------------

    @property
    def id(self) -> str | None:
        """The id the cookie carries, None until the session is first saved."""
        return self._id

    @property
    def is_new(self) -> bool:
        """True when the request brought no live session (none yet in Redis)."""
        return self._id is None

    def regenerate(self) -> None:
        """Give the session a new id when it is saved, in one atomic step that deletes the
        old one; the data stays. Call it at login (and at any change of privilege) so an
        id planted in the browser before the login (session fixation) is worth nothing."""
        self._check_open()
        self._regenerate = True
        self.modified = True

    def bind_user(self, user_id: str | int) -> None:
        """Record this session as `user_id`'s, for logout_everywhere(). A session bound to
        a new user moves to a new id (as regenerate() does) in the user's Redis slot, so
        the save and the user's index are one atomic script."""
        self._check_open()
        user = str(user_id)
        if not user or "{" in user or "}" in user:
            raise ValueError(f"user id {user_id!r} must be non-empty, without braces")
        self._user = user
        self.modified = True

    @property
    def user_id(self) -> str | None:
        return self._user

    @property
    def permanent(self) -> bool:
        """Whether the cookie persists (Max-Age) or ends with the browser session. The
        default is the store's (browser_session=); a value set here is saved with the
        session."""
        if self._permanent is None:
            return not self._options.browser_session
        return self._permanent

    @permanent.setter
    def permanent(self, value: bool) -> None:
        self._check_open()
        self._permanent = bool(value)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise SessionClosed(
                f"session {self._describe()} was saved when the response started; this "
                "change would be lost: make it before the response is returned"
            )
        if not self._writable:
            raise SessionClosed(
                f"session {self._describe()} is read-only on a WebSocket (no cookie can "
                "be set on one): change it in an HTTP request"
            )

    def _describe(self) -> str:
        return "(new)" if self._id is None else _ids.handle(self._id)


def encode(options: SessionOptions, name: str, value: Any) -> bytes:
    try:
        raw = options.serializer.dumps(value)
    except (TypeError, ValueError) as exc:
        raise SessionValueError(
            f"session field {name!r}: {type(value).__name__} value cannot be stored ({exc}); "
            "store JSON values (str, int, float, bool, None, list, dict with str keys), or "
            "pass serializer= to the session store",
            field=name,
        ) from exc
    if not isinstance(raw, bytes):
        raise TypeError(f"session serializer returned {type(raw).__name__}, not bytes")
    return raw


def check_size(options: SessionOptions, total: int, name: str, field_size: int) -> None:
    if total > options.max_size:
        raise SessionTooLarge(
            f"session field {name!r} ({field_size} bytes) takes the session to {total} "
            f"bytes, over its limit of {options.max_size} (max_size): nothing was written; "
            "keep large data in your database and its id in the session",
            field=name,
            size=total,
            limit=options.max_size,
        )


def from_reply(
    cls: type[Session], options: SessionOptions, session_id: str, reply: list[Any], writable: bool
) -> Session:
    """The Session for a session_load.lua reply (flat field/value list; bytes or str)."""
    stored: dict[str, bytes] = {}
    user = None
    permanent = None
    issued = None
    for i in range(0, len(reply), 2):
        name = reply[i].decode() if isinstance(reply[i], bytes) else str(reply[i])
        value = reply[i + 1]
        raw = value if isinstance(value, bytes) else str(value).encode()
        if name.startswith(DATA):
            stored[name[len(DATA) :]] = raw
        elif name == USER:
            user = raw.decode()
        elif name == PERMANENT:
            permanent = raw == b"1"
        elif name == ISSUED:
            issued = int(raw)
    return cls(
        options,
        session_id,
        stored,
        user,
        sent_cookie=True,
        writable=writable,
        permanent=permanent,
        issued_ms=issued,
    )


def check_client(client: Any, wanted: tuple[type, ...], what: str, hint: str) -> Any:
    """`client` if it is one of `wanted`, else a TypeError saying what to pass."""
    if isinstance(client, wanted) and not type(client).__name__.endswith("Pipeline"):
        return client
    raise TypeError(
        f"{what} needs {hint}, got {type(client).__module__}.{type(client).__qualname__}"
    )
