"""seawall.sessions' pure core: ids, cookies, what a save writes, value and size checks."""

from __future__ import annotations

import subprocess
import sys

import pytest

from seawall.sessions import _cookies, _ids
from seawall.sessions._options import make_options
from seawall.sessions._plan import plan, response_cookie
from seawall.sessions._session import Session
from seawall.sessions.errors import SessionClosed, SessionTooLarge, SessionValueError

OPTIONS = make_options(max_size=200)


def loaded(**fields: str) -> Session:
    stored = {name: f'"{value}"'.encode() for name, value in fields.items()}
    return Session(OPTIONS, _ids.new_id(), stored, sent_cookie=True)


def test_ids_are_256_random_bits_and_shaped_checked() -> None:
    ids = {_ids.new_id() for _ in range(1000)}
    assert len(ids) == 1000
    sample = ids.pop()
    assert _ids.is_valid(sample) and len(sample.split(".")[1]) == 43
    for forged in [
        "",
        "abc",
        sample + "x",
        sample[:-1],
        "../" + sample[3:],
        sample.replace(".", ":"),
    ]:
        assert not _ids.is_valid(forged), forged


def test_a_key_never_contains_the_secret_and_regeneration_keeps_the_slot() -> None:
    session_id = _ids.new_id()
    key = _ids.key("seawall:session", session_id)
    assert session_id.split(".")[1] not in key
    again = _ids.new_id(_ids.tag_of(session_id))
    assert again != session_id
    assert _ids.key("p", again).split("}")[0] == _ids.key("p", session_id).split("}")[0]


def test_cookie_is_httponly_lax_and_secure_only_over_https() -> None:
    policy = make_options().cookie
    plain = _cookies.set_cookie(policy, "v", 60, https=False, now=0)
    assert plain == (
        "session=v; Path=/; Max-Age=60; Expires=Thu, 01 Jan 1970 00:01:00 GMT; HttpOnly; "
        "SameSite=Lax"
    )
    assert "; Secure" in _cookies.set_cookie(policy, "v", 60, https=True)
    forced = make_options(secure=True, same_site="strict").cookie
    assert "Secure" in _cookies.set_cookie(forced, "v", 60, https=False)
    assert "SameSite=Strict" in _cookies.set_cookie(forced, "v", 60, https=False)
    assert "Max-Age=0" in _cookies.delete_cookie(policy, https=False)
    assert _cookies.read('a=1; session="x.y"; session=z', "session") == "x.y"
    assert _cookies.read("a=1", "session") is None
    with pytest.raises(ValueError, match="same_site"):
        make_options(same_site="sometimes")


def test_only_changed_and_removed_fields_are_written() -> None:
    session = loaded(a="1", b="2", c="3")
    session["a"] = "changed"
    del session["b"]
    session["new"] = "4"
    result = plan(session)
    assert result.mode == "update"
    assert result.pairs == [("d:a", b'"changed"'), ("d:new", b'"4"')]
    assert result.removed == ["d:b"]


def test_a_value_changed_in_place_is_found_by_its_bytes() -> None:
    session = Session(OPTIONS, _ids.new_id(), {"cart": b"[1]", "x": b"0"})
    session["cart"].append(2)
    assert plan(session).pairs == [("d:cart", b"[1,2]")]
    # Nothing to write (and its cookie, sent at `issued_ms`, is not due a refresh).
    untouched = Session(OPTIONS, _ids.new_id(), {"cart": b"[1]"}, issued_ms=0)
    assert plan(untouched, now_ms=1000).mode is None


def test_new_regenerated_cleared_and_emptied_sessions() -> None:
    fresh = Session(OPTIONS)
    assert plan(fresh).mode is None and response_cookie(fresh, plan(fresh), False) is None
    fresh = Session(OPTIONS)
    fresh["a"] = 1
    assert plan(fresh).mode == "new" and plan(fresh).session_id is not None

    session = loaded(a="1")
    session.regenerate()
    result = plan(session)
    assert result.mode == "regen" and result.index_user is None
    assert result.new_id != session.id and result.cookie_id == result.new_id
    assert _ids.tag_of(result.new_id or "") == _ids.tag_of(session.id or "")
    assert ("d:a", b'"1"') in result.pairs

    # Bound to a user: a new id in the user's slot, written and indexed in one script
    # after the old id is ended in its own.
    session = loaded(a="1")
    session.regenerate()
    session.bind_user(42)
    result = plan(session)
    assert result.mode == "new" and result.retire_id == session.id
    assert result.cookie_id == result.session_id != session.id
    assert _ids.tag_of(result.session_id or "") == _ids.user_tag("42")
    assert result.index_user == "42" and result.index_add == result.session_id
    assert ("m:user", b"42") in result.pairs and ("d:a", b'"1"') in result.pairs

    session = loaded(a="1")
    session.clear()
    session["b"] = "2"
    assert plan(session).mode == "reset" and plan(session).pairs == [("d:b", b'"2"')]

    session = loaded(a="1")
    session.clear()
    result = plan(session)
    assert result.mode == "delete" and result.cookie_id is None
    assert "Max-Age=0" in (response_cookie(session, result, False) or "")

    dead = Session(OPTIONS, sent_cookie=True)
    assert "Max-Age=0" in (response_cookie(dead, plan(dead), False) or "")


def test_a_value_json_cannot_hold_is_refused_where_it_is_set() -> None:
    session = Session(OPTIONS)
    for value in [object(), {1, 2}, float("nan"), b"bytes"]:
        with pytest.raises(SessionValueError, match="session field 'when'") as info:
            session["when"] = value
        assert info.value.field == "when"
    assert "when" not in session
    session["ok"] = []
    session["ok"].append(object())
    with pytest.raises(SessionValueError, match="'ok'"):
        plan(session)


def test_the_size_limit_names_the_field_and_the_limit() -> None:
    session = Session(OPTIONS)
    session["small"] = "x" * 50
    with pytest.raises(SessionTooLarge, match=r"field 'big'.*limit of 200") as info:
        session["big"] = "y" * 200
    assert (info.value.field, info.value.limit) == ("big", 200)
    assert "big" not in session and session["small"] == "x" * 50
    session["list"] = []
    session["list"].extend(["z" * 50] * 4)
    with pytest.raises(SessionTooLarge, match="'list'"):
        plan(session)


def test_a_closed_session_refuses_changes_but_can_be_read() -> None:
    session = loaded(a="1")
    session.close()
    assert session["a"] == "1"
    for change in (
        lambda: session.__setitem__("b", 1),
        lambda: session.pop("a"),
        session.clear,
        session.regenerate,
        lambda: session.bind_user(1),
    ):
        with pytest.raises(SessionClosed, match="would be lost"):
            change()


def test_a_websocket_session_is_read_only() -> None:
    session = Session(OPTIONS, _ids.new_id(), {"a": b"1"}, writable=False)
    assert session["a"] == 1
    with pytest.raises(SessionClosed, match="read-only on a WebSocket"):
        session["b"] = 2


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="serializer='yaml'"):
        make_options(serializer="yaml")
    with pytest.raises(ValueError, match="max_age"):
        make_options(max_age=0)
    with pytest.raises(ValueError, match="braces"):
        make_options(prefix="a{b}")


def test_import_seawall_pulls_in_no_web_framework() -> None:
    code = (
        "import sys, seawall, seawall.sessions\n"
        "bad = [m for m in ('starlette', 'flask', 'fastapi') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_pickle_only_by_name_and_unreadable_fields_are_dropped() -> None:
    pickled = make_options(serializer="pickle")
    session = Session(pickled)
    session["tags"] = {"a", "b"}
    (pair,) = plan(session).pairs
    assert pair[0] == "d:tags"
    # Bytes the serializer cannot read (written by another serializer): dropped from the
    # view, removed by the next save, never an error for the request.
    mixed = Session(OPTIONS, _ids.new_id(), {"ok": b"1", "old": pair[1]})
    assert dict(mixed) == {"ok": 1}
    mixed["ok"] = 2
    assert plan(mixed).removed == ["d:old"]
