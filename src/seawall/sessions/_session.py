"""The session object a request sees, and what saving it must write. No I/O.

The request works on a local dict. When the response starts, each value is serialized
again and compared with the bytes loaded from Redis: only fields whose bytes differ are
written, only fields the request deleted are removed. So a value changed in place
(`session["cart"].append(3)`) is saved, and two parallel requests of one user that touch
different fields both keep their writes.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass, field
from typing import Any, Literal

from seawall.sessions import _cookies, _ids
from seawall.sessions._options import SessionOptions
from seawall.sessions.errors import SessionClosed, SessionTooLarge, SessionValueError
from seawall.shared._concurrency import log

DATA = "d:"
CREATED = "m:created"
USER = "m:user"

Mode = Literal["new", "update", "reset", "regen", "regen-new", "delete"]


class Session(MutableMapping[str, Any]):
    """A dict of JSON values (by default), plus regenerate(), bind_user() and the id.

    Keys are str. Setting a value serializes it at once, so a value the serializer
    refuses, or one that takes the session over its size limit, raises right there
    (SessionValueError, SessionTooLarge) with the field's name, and nothing is written.
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
    ) -> None:
        self._options = options
        self._id = session_id
        self._stored = dict(stored or {})
        self._data: dict[str, Any] = {}
        for name, raw in list(self._stored.items()):
            try:
                self._data[name] = options.serializer.loads(raw)
            except Exception as exc:  # bytes from another serializer or a bad write
                # Dropped from the view (and removed from Redis if the session is saved):
                # a session field nobody can read must not fail every request of its user.
                log.warning("session field %r could not be read (%s); dropped", name, exc)
        self._sizes = {name: len(name.encode()) + len(self._stored[name]) for name in self._data}
        self._stored_user = user_id
        self._user = user_id
        self._cleared = False
        self._regenerate = False
        self._closed = False
        self._writable = writable
        # A cookie came with the request but named no live session: the response drops it.
        self.sent_dead_cookie = sent_cookie and session_id is None

    # -- the mapping ---------------------------------------------------------------

    def __getitem__(self, name: str) -> Any:
        return self._data[name]

    def __setitem__(self, name: str, value: Any) -> None:
        self._check_open()
        if not isinstance(name, str):
            raise TypeError(f"session keys are str, got {name!r}")
        raw = encode(self._options, name, value)
        size = len(name.encode()) + len(raw)
        total = sum(s for n, s in self._sizes.items() if n != name) + size
        check_size(self._options, total, name, size)
        self._data[name] = value
        self._sizes[name] = size

    def __delitem__(self, name: str) -> None:
        self._check_open()
        del self._data[name]
        self._sizes.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"<seawall Session {self._data!r}>"

    def clear(self) -> None:
        """Empty the session and unbind its user. Saved as one replacement: fields other
        requests set meanwhile go too. An empty session is deleted, with its cookie."""
        self._check_open()
        self._data.clear()
        self._sizes.clear()
        self._user = None
        self._cleared = True

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

    def bind_user(self, user_id: str | int) -> None:
        """Record this session as `user_id`'s, for logout_everywhere(). Costs one more
        Redis round trip when the response is saved."""
        self._check_open()
        user = str(user_id)
        if not user or "{" in user or "}" in user:
            raise ValueError(f"user id {user_id!r} must be non-empty, without braces")
        self._user = user

    @property
    def user_id(self) -> str | None:
        return self._user

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


@dataclass(frozen=True)
class SavePlan:
    """What the save script is to do; `mode` None: nothing to write."""

    mode: Mode | None
    session_id: str | None
    new_id: str | None = None
    pairs: list[tuple[str, bytes]] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    bind: bool = False

    @property
    def cookie_id(self) -> str | None:
        """The id the response's cookie is to carry (None: drop the cookie)."""
        if self.mode == "delete":
            return None
        return self.new_id or self.session_id


def plan(session: Session) -> SavePlan:
    """Decide the write for `session` from what the request did (no I/O).

    Raises SessionValueError / SessionTooLarge for values changed in place."""
    opts = session._options
    encoded = {name: encode(opts, name, value) for name, value in session._data.items()}
    sizes = {name: len(name.encode()) + len(raw) for name, raw in encoded.items()}
    if sizes:
        largest = max(sizes, key=lambda n: sizes[n])
        check_size(opts, sum(sizes.values()), largest, sizes[largest])
    user = session._user
    empty = not encoded and user is None
    current = session._id
    everything = [(DATA + name, raw) for name, raw in encoded.items()]
    if user is not None:
        everything.append((USER, user.encode()))
    bind = user is not None and (user != session._stored_user or session._regenerate)

    if current is None:
        if empty:
            return SavePlan(None, None)
        return SavePlan("new", _ids.new_id(), pairs=everything, bind=user is not None)
    if empty:
        return SavePlan("delete", current)
    if session._regenerate:
        return SavePlan(
            "regen", current, new_id=_ids.new_id(_ids.tag_of(current)), pairs=everything, bind=bind
        )
    if session._cleared:
        return SavePlan("reset", current, pairs=everything, bind=bind)
    pairs = [
        (DATA + name, raw) for name, raw in encoded.items() if session._stored.get(name) != raw
    ]
    if user != session._stored_user and user is not None:
        pairs.append((USER, user.encode()))
    removed = [DATA + name for name in session._stored if name not in encoded]
    if session._stored_user is not None and user is None:
        removed.append(USER)
    if not pairs and not removed:
        return SavePlan(None, current)
    return SavePlan("update", current, pairs=pairs, removed=removed, bind=bind)


def from_reply(
    cls: type[Session], options: SessionOptions, session_id: str, reply: list[Any], writable: bool
) -> Session:
    """The Session for a session_load.lua reply (flat field/value list; bytes or str)."""
    stored: dict[str, bytes] = {}
    user = None
    for i in range(0, len(reply), 2):
        name = reply[i].decode() if isinstance(reply[i], bytes) else str(reply[i])
        value = reply[i + 1]
        raw = value if isinstance(value, bytes) else str(value).encode()
        if name.startswith(DATA):
            stored[name[len(DATA) :]] = raw
        elif name == USER:
            user = raw.decode()
    return cls(options, session_id, stored, user, sent_cookie=True, writable=writable)


def response_cookie(session: Session, plan: SavePlan, https: bool) -> str | None:
    """The Set-Cookie header value for a response after `plan` was saved, or None."""
    options = session._options
    if plan.cookie_id is not None:
        # Every response of a live session carries its cookie again: the browser's
        # expiry slides with the server's.
        return _cookies.set_cookie(options.cookie, plan.cookie_id, options.cookie_max_age, https)
    if session.sent_dead_cookie or session.id is not None:
        return _cookies.delete_cookie(options.cookie, https)
    return None


def check_client(client: Any, wanted: tuple[type, ...], what: str, hint: str) -> Any:
    """`client` if it is one of `wanted`, else a TypeError saying what to pass."""
    if isinstance(client, wanted) and not type(client).__name__.endswith("Pipeline"):
        return client
    raise TypeError(
        f"{what} needs {hint}, got {type(client).__module__}.{type(client).__qualname__}"
    )
