"""seawall.sessions.flask.RedisSessionInterface in a Flask app under werkzeug's WSGI
server, on one server and on Redis Cluster, driven over HTTP by httpx (a session shared
by a Flask app and a FastAPI app: test_sessions_docs.py)."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import timedelta
from typing import Any

import httpx
import pytest
import sessionapps
from conftest import Target

from seawall.sessions import _ids
from seawall.shared import _scripts


@pytest.fixture(scope="module", params=["standalone", "cluster"])
def topology(request: pytest.FixtureRequest) -> Iterator[Any]:
    """Two instances of the app on one Redis, started once per module and topology."""
    cluster = request.param == "cluster"
    if cluster:
        url = request.getfixturevalue("seawall_cluster").url
    else:
        url = request.getfixturevalue("seawall_server").url
    target = Target(url, cluster)
    with ExitStack() as stack:
        clients, bases = [], []
        for _ in range(2):
            client = sessionapps.sync_client(url, cluster)
            app = sessionapps.flask_app(client, max_size=2000)
            bases.append(stack.enter_context(sessionapps.werkzeug_thread(app)))
            clients.append(client)
        yield target, (clients, bases)
    target.close()


@pytest.fixture
def target(topology: Any) -> Any:
    target = topology[0]
    admin = target.sync()
    if target.cluster:
        admin.flushall(target_nodes=admin.PRIMARIES)
    else:
        admin.flushall()
    return target


@pytest.fixture
def apps(topology: Any, target: Any) -> Any:
    return topology[1]


def test_flask_sessions_shared_by_two_instances_in_few_round_trips(apps: Any, target: Any) -> None:
    (one, _), (base_one, base_two) = apps
    for name in ("session_load", "session_save"):
        target.sync().script_load(_scripts.load("seawall.sessions", name).source)
    with httpx.Client(base_url=base_one) as user:
        one.sent.clear()
        cookie = user.get("/put?colour=blue").headers["set-cookie"]
        assert one.sent == ["EVALSHA"]
        assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Secure" not in cookie
        session_id = user.cookies["session"]
        assert target.keys("seawall:session:*") == [_ids.key("seawall:session", session_id)]
        with httpx.Client(base_url=base_two, cookies={"session": session_id}) as other:
            assert other.get("/").json()["data"] == {"colour": "blue"}
        one.sent.clear()
        user.get("/")
        assert one.sent == ["EVALSHA"]
        one.sent.clear()
        user.get("/put?colour=red")
        assert one.sent == ["EVALSHA", "EVALSHA"]


def test_flask_parallel_writes_regenerate_and_logout_everywhere(apps: Any) -> None:
    _, (base_one, base_two) = apps
    with httpx.Client(base_url=base_one) as user:
        user.get("/put?start=1")
        cookies = {"session": user.cookies["session"]}
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            futures = [
                pool.submit(httpx.get, f"{base_one}/put?wait=2&{field}=1", cookies=cookies)
                for field in ("left", "right")
            ]
            assert [f.result(timeout=20).status_code for f in futures] == [200, 200]
        assert user.get("/").json()["data"] == {"start": "1", "left": "1", "right": "1"}
        before = user.cookies["session"]
        user.get("/login?user=alice")
        assert user.cookies["session"] != before
        with httpx.Client(base_url=base_two, cookies={"session": before}) as attacker:
            assert attacker.get("/").json() == {"data": {}, "user": None}
        with httpx.Client(base_url=base_two) as laptop:
            laptop.get("/login?user=alice")
            assert user.get("/everywhere?user=alice").json() == {"ended": 2}
            assert laptop.get("/").json() == {"data": {}, "user": None}
        assert user.get("/").json() == {"data": {}, "user": None}


def test_flask_bad_input(apps: Any, target: Any) -> None:
    _, (base_one, _) = apps
    with httpx.Client(base_url=base_one) as user:
        user.get("/put?keep=1")
        refused = user.get("/put?big=" + "x" * 3000).json()
        assert refused["error"] == "SessionTooLarge" and "'big'" in refused["message"]
        assert user.get("/grow?n=40").status_code == 500
        assert user.get("/").json()["data"] == {"keep": "1"}
        user.get("/logout")
        assert target.keys("seawall:session:*") == []
    with sessionapps.free_socket() as closed:
        port = closed.getsockname()[1]
    down = sessionapps.flask_app(sessionapps.sync_client(f"redis://127.0.0.1:{port}", False))
    with sessionapps.werkzeug_thread(down) as base:
        response = httpx.get(f"{base}/", cookies={"session": _ids.new_id()})
        assert response.status_code == 500


def test_flask_config_sets_the_cookie_and_lifetime(seawall_server: Any) -> None:
    """Flask's SESSION_COOKIE_* and PERMANENT_SESSION_LIFETIME, set in app.config, win over
    seawall's defaults (e.g. Secure behind a proxy that terminates TLS)."""
    client = sessionapps.sync_client(seawall_server.url, False)
    client.flushdb()
    config = {
        "SESSION_COOKIE_SECURE": True,
        "SESSION_COOKIE_NAME": "sid",
        "SESSION_COOKIE_DOMAIN": "example.com",
        "SESSION_COOKIE_SAMESITE": "Strict",
        "SESSION_COOKIE_PATH": "/shop",
        "SESSION_COOKIE_HTTPONLY": False,
        "PERMANENT_SESSION_LIFETIME": timedelta(hours=1),
    }
    app = sessionapps.flask_app(client, config)
    cookie = app.test_client().get("/put?colour=blue").headers["set-cookie"]
    assert cookie.startswith("sid=")
    for part in ("Secure", "Domain=example.com", "SameSite=Strict", "Path=/shop", "Max-Age=3600"):
        assert f"; {part}" in cookie, part
    assert "HttpOnly" not in cookie
    (key,) = client.keys("seawall:session:*")
    assert 3_500_000 < client.pttl(key) <= 3_600_000
    # APPLICATION_ROOT is the path when SESSION_COOKIE_PATH is not set (Flask's rule).
    app = sessionapps.flask_app(client, {"APPLICATION_ROOT": "/app"})
    cookie = app.test_client().get("/put?colour=blue").headers["set-cookie"]
    assert "; Path=/app;" in cookie and "SameSite=Lax" in cookie  # seawall's default stays
    # A keyword given to RedisSessionInterface wins over the config.
    app = sessionapps.flask_app(client, {"SESSION_COOKIE_SECURE": True}, secure=False)
    assert "Secure" not in app.test_client().get("/put?a=1").headers["set-cookie"]
    client.close()


def test_flask_flashed_markup_and_categories_come_back_as_they_went(
    seawall_server: Any,
) -> None:
    client = sessionapps.sync_client(seawall_server.url, False)
    user = sessionapps.flask_app(client).test_client()
    user.get("/flash")
    assert user.get("/flashed").json == [
        ["tuple", "message", "str", "saved"],
        ["tuple", "warning", "Markup", "<b>careful</b>"],
    ]
    assert user.get("/flashed").json == []
    client.close()


def test_flask_accessed_modified_and_vary_cookie(seawall_server: Any) -> None:
    from flask.globals import request_ctx

    def session() -> Any:  # the request's session, read without marking it accessed
        return request_ctx._session

    client = sessionapps.sync_client(seawall_server.url, False)
    app = sessionapps.flask_app(client)
    with app.test_client() as visitor:
        response = visitor.get("/nothing")
        assert "Vary" not in response.headers and "set-cookie" not in response.headers
        assert not session().modified and not session().accessed
        # A visitor without a cookie: the page still depends on the (absent) cookie.
        response = visitor.get("/read")
        assert response.headers["Vary"] == "Cookie" and "set-cookie" not in response.headers
        assert session().accessed and not session().modified
        response = visitor.get("/put?colour=red")
        assert response.headers["Vary"] == "Cookie" and "set-cookie" in response.headers
        assert session().modified
        response = visitor.get("/read")
        assert response.json == {"colour": "red"} and response.headers["Vary"] == "Cookie"
        # A read sends no cookie (see test_sessions_asgi: a read racing a login).
        assert "set-cookie" not in response.headers
    client.close()
