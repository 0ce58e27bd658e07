"""seawall.sessions.flask.RedisSessionInterface in a Flask app under werkzeug's WSGI
server, on one server and on Redis Cluster, driven over HTTP by httpx (a session shared
by a Flask app and a FastAPI app: test_sessions_docs.py)."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterator
from contextlib import ExitStack
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
