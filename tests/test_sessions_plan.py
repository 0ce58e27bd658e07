"""The session's pure decisions (seawall.sessions._session, _cookies), without a server:
what a save writes and indexes, and when a response carries the cookie."""

from __future__ import annotations

import json

import pytest

from seawall.sessions import SessionValueError, _cookies, _ids, _plan
from seawall.sessions._options import make_options
from seawall.sessions._session import Session


def loaded(user: str | None = None, tag: str | None = None, **stored: bytes) -> Session:
    session_id = _ids.new_id(tag)
    return Session(make_options(max_age=100), session_id, stored, user, sent_cookie=True)


def test_every_way_of_changing_the_dict_is_checked() -> None:
    session = loaded()
    for change in (
        lambda: session.update(when=object()),
        lambda: session.setdefault("when", object()),
        lambda: session.__ior__({"when": object()}),
    ):
        with pytest.raises(SessionValueError):
            change()
    assert dict(session) == {} and not session.modified
    session |= {"a": 1}
    assert session.pop("a") == 1 and session.pop("b", 2) == 2 and session.modified
    assert json.dumps(loaded(a=b"1")) == '{"a": 1}'


def test_a_read_sends_no_cookie_until_a_refresh_is_due() -> None:
    session = loaded(a=b"1")
    session.issued_ms = 1_000_000
    assert _plan.plan(session, 1_000_000 + 49_000) == _plan.SavePlan(None, session.id, cookie=None)
    due = _plan.plan(session, 1_000_000 + 50_000)
    assert due.mode == "update" and not due.pairs and due.cookie_id == session.id
    session.permanent = False  # a browser-session cookie has nothing to refresh
    assert _plan.plan(session, 10**12).mode == "update"  # the flag itself is saved
    stored = loaded(a=b"1")
    stored._stored_permanent = stored._permanent = False
    assert _plan.plan(stored, 10**12).cookie is None


def test_binding_moves_the_session_to_its_users_slot_and_indexes_it_there() -> None:
    session = loaded(a=b"1")
    session.bind_user("alice")
    plan = _plan.plan(session)
    assert plan.mode == "new" and plan.retire_id == session.id and plan.retire_user is None
    assert _ids.tag_of(plan.session_id or "") == _ids.user_tag("alice")
    assert plan.index_user == "alice" and plan.index_add == plan.session_id
    bound = loaded("alice", _ids.user_tag("alice"), a=b"1")
    bound.clear()
    plan = _plan.plan(bound)
    assert plan.mode == "delete" and plan.index_user == "alice"
    assert plan.index_remove == bound.id and plan.cookie == "drop"
    # An id bound by an older seawall (not in its user's slot) is in no such index.
    legacy = loaded("alice", "AAAA", a=b"1")
    legacy.clear()
    assert _plan.plan(legacy).index_user is None


def test_the_cookie_attributes() -> None:
    policy = _cookies.CookiePolicy(domain="example.com", partitioned=True)
    cookie = _cookies.set_cookie(policy, "v", 60, https=False, now=0)
    assert cookie == (
        "session=v; Path=/; Max-Age=60; Expires=Thu, 01 Jan 1970 00:01:00 GMT; "
        "Domain=example.com; Secure; HttpOnly; SameSite=Lax; Partitioned"
    )
    assert _cookies.set_cookie(_cookies.CookiePolicy(), "v", None, https=True) == (
        "session=v; Path=/; Secure; HttpOnly; SameSite=Lax"
    )
    with pytest.raises(ValueError):
        _cookies.CookiePolicy(path="/a;b")
