"""The session object a request sees, and what saving it must write. No I/O.

The request works on a local dict. When the response starts, each value is serialized
again and compared with the bytes loaded from Redis: only fields whose bytes differ are
written, only fields the request deleted are removed. So a value changed in place
(`session["cart"].append(3)`) is saved, and two parallel requests of one user that touch
different fields both keep their writes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from seawall.sessions import _cookies, _ids
from seawall.sessions._options import SessionOptions
from seawall.sessions.errors import SessionClosed, SessionTooLarge, SessionValueError
from seawall.shared._concurrency import log

DATA = "d:"
CREATED = "m:created"
USER = "m:user"
PERMANENT = "m:permanent"  # "1"/"0", only when set on the session (else the store's default)
ISSUED = "m:issued"  # when a response last carried the cookie (ms, server clock)

Mode = Literal["new", "update", "reset", "regen", "delete", "retire"]


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


@dataclass(frozen=True)
class SavePlan:
    """What the save script is to do (`mode` None: nothing to write), and what the
    response's cookie is to do: "set" (carry cookie_id), "drop", or None (no cookie).

    `session_id` is the id the script works on (KEYS[1]); `new_id` the id a "regen" moves
    it to. `index_user`: the user whose index (KEYS[3], in the session's slot) the same
    script adds `index_add`'s handle to and removes `index_remove`'s from. `retire_id`:
    an id to end first, in a script of its own (removing it from `retire_user`'s index),
    when the session moves to another slot: bound to a user whose tag differs."""

    mode: Mode | None
    session_id: str | None
    new_id: str | None = None
    pairs: list[tuple[str, bytes]] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    index_user: str | None = None
    index_add: str | None = None
    index_remove: str | None = None
    retire_id: str | None = None
    retire_user: str | None = None
    cookie: Literal["set", "drop"] | None = "set"

    @property
    def cookie_id(self) -> str | None:
        """The id the response's cookie is to carry (None: drop or send no cookie)."""
        if self.cookie != "set":
            return None
        return self.new_id or self.session_id


def _meta(session: Session) -> list[tuple[str, bytes]]:
    pairs = []
    if session._user is not None:
        pairs.append((USER, session._user.encode()))
    if session._permanent is not None:
        pairs.append((PERMANENT, b"1" if session._permanent else b"0"))
    return pairs


def refresh_due(session: Session, now_ms: int) -> bool:
    """Whether a request that changed nothing re-sends the cookie: a persistent cookie
    half through its Max-Age (so the browser's expiry slides with Redis'). Every other
    such response sends no cookie: a read that overlapped a login's regenerate() must
    not put the old, deleted id back in the browser."""
    opts = session._options
    if not opts.refresh_cookie or not session.permanent or session.id is None:
        return False
    if session.issued_ms is None:
        return True
    return now_ms - session.issued_ms >= opts.cookie_max_age * 500


def plan(session: Session, now_ms: int = 0) -> SavePlan:
    """Decide the write for `session` from what the request did (no I/O). `now_ms`, the
    time (ms since the epoch), decides whether an unchanged session's cookie is re-sent.

    Raises SessionValueError / SessionTooLarge for values changed in place."""
    opts = session._options
    view = session._view()
    encoded = {name: encode(opts, name, value) for name, value in view.items()}
    sizes = {name: len(name.encode()) + len(raw) for name, raw in encoded.items()}
    if sizes:
        largest = max(sizes, key=lambda n: sizes[n])
        check_size(opts, sum(sizes.values()), largest, sizes[largest])
    user = session._user
    empty = not encoded and user is None
    current = session._id
    everything = [(DATA + name, raw) for name, raw in encoded.items()] + _meta(session)
    # A session bound to a user lives in its user's slot, beside the user's index.
    tag = _ids.user_tag(user) if user is not None else None

    stored_user = session._stored_user
    # The user whose index holds this id: the stored user, when the id has that user's
    # tag (an id bound by an older seawall, without it, is in no index of this form).
    indexed = None
    if current is not None and stored_user is not None:
        indexed = stored_user if _ids.user_tag(stored_user) == _ids.tag_of(current) else None
    if current is None:
        if empty:
            return SavePlan(None, None, cookie="drop" if session.sent_dead_cookie else None)
        new_id = _ids.new_id(tag)
        return SavePlan("new", new_id, pairs=everything, index_user=user, index_add=new_id)
    if empty:
        return SavePlan("delete", current, cookie="drop", index_user=indexed, index_remove=current)
    if tag is not None and (tag != _ids.tag_of(current) or stored_user not in (None, user)):
        # Bound to a user of another slot (or another user): the old id ends in one
        # script, the new one is written and indexed in another. Between them the
        # session is nowhere: a crash there logs the user out, never keeps the old id.
        new_id = _ids.new_id(tag)
        return SavePlan(
            "new",
            new_id,
            pairs=everything,
            index_user=user,
            index_add=new_id,
            retire_id=current,
            retire_user=indexed,
        )
    if session._regenerate:
        new_id = _ids.new_id(_ids.tag_of(current))
        owner = user if user is not None else indexed
        return SavePlan(
            "regen",
            current,
            new_id=new_id,
            pairs=everything,
            index_user=owner,
            index_add=new_id if user is not None else None,
            index_remove=current if indexed is not None else None,
        )
    # Same id from here on; user is None, or stored_user is None or user.
    unbinds = stored_user is not None and user is None
    index: dict[str, Any] = {}
    if unbinds:
        index = {"index_user": indexed, "index_remove": current} if indexed else {}
    elif user != stored_user:
        index = {"index_user": user, "index_add": current}
    if session._cleared:
        return SavePlan("reset", current, pairs=everything, **index)
    pairs = [
        (DATA + name, raw) for name, raw in encoded.items() if session._stored.get(name) != raw
    ]
    if user != stored_user and user is not None:
        pairs.append((USER, user.encode()))
    if session._permanent is not None and session._permanent != session._stored_permanent:
        pairs.append((PERMANENT, b"1" if session._permanent else b"0"))
    removed = [DATA + name for name in session._stored if name not in encoded]
    if unbinds:
        removed.append(USER)
    if not pairs and not removed:
        if refresh_due(session, now_ms):
            # An empty update: the script checks the session still lives, and records
            # when its cookie was sent.
            return SavePlan("update", current)
        return SavePlan(None, current, cookie=None)
    return SavePlan("update", current, pairs=pairs, removed=removed, **index)


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


def response_cookie(session: Session, plan: SavePlan, https: bool) -> str | None:
    """The Set-Cookie header value for a response after `plan` was saved, or None."""
    options = session._options
    if plan.cookie == "set" and plan.cookie_id is not None:
        max_age = options.cookie_max_age if session.permanent else None
        return _cookies.set_cookie(options.cookie, plan.cookie_id, max_age, https)
    if plan.cookie == "drop":
        return _cookies.delete_cookie(options.cookie, https)
    return None


def check_client(client: Any, wanted: tuple[type, ...], what: str, hint: str) -> Any:
    """`client` if it is one of `wanted`, else a TypeError saying what to pass."""
    if isinstance(client, wanted) and not type(client).__name__.endswith("Pipeline"):
        return client
    raise TypeError(
        f"{what} needs {hint}, got {type(client).__module__}.{type(client).__qualname__}"
    )
