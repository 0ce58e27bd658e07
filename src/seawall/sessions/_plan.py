"""What saving a session must write, and what the response does with the cookie. No I/O.

The request works on a local dict. When the response starts, each value is serialized
again and compared with the bytes loaded from Redis: only fields whose bytes differ are
written, only fields the request deleted are removed. So a value changed in place
(`session["cart"].append(3)`) is saved, and two parallel requests of one user that touch
different fields both keep their writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from seawall.sessions import _cookies, _ids
from seawall.sessions._session import DATA, PERMANENT, USER, Session, check_size, encode

Mode = Literal["new", "update", "reset", "regen", "delete", "retire"]


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


def response_cookie(session: Session, plan: SavePlan, https: bool) -> str | None:
    """The Set-Cookie header value for a response after `plan` was saved, or None."""
    options = session._options
    if plan.cookie == "set" and plan.cookie_id is not None:
        max_age = options.cookie_max_age if session.permanent else None
        return _cookies.set_cookie(options.cookie, plan.cookie_id, max_age, https)
    if plan.cookie == "drop":
        return _cookies.delete_cookie(options.cookie, https)
    return None
