"""seawall.sessions.SessionMiddleware in a Starlette app under uvicorn, on one server and
on Redis Cluster, driven over HTTP by httpx."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import timedelta
from typing import Any

import httpx
import pytest
import redis.asyncio
import sessionapps
from conftest import Target

from seawall.sessions import _ids, logout_everywhere
from seawall.sessions._async.store import AsyncSessionStore
from seawall.sessions._options import SessionOptions
from seawall.shared import _scripts


@pytest.fixture(scope="module", params=["standalone", "cluster"])
def topology(request: pytest.FixtureRequest) -> Iterator[Any]:
    """Two instances of the app (two uvicorn servers, two clients) on one Redis, started
    once per module and topology."""
    cluster = request.param == "cluster"
    if cluster:
        url = request.getfixturevalue("seawall_cluster").url
    else:
        url = request.getfixturevalue("seawall_server").url
    target = Target(url, cluster)
    with ExitStack() as stack:
        clients, bases = [], []
        for _ in range(2):
            client = sessionapps.async_client(url, cluster)
            app = sessionapps.starlette_app(client, max_size=2000, max_age=100)
            bases.append(stack.enter_context(sessionapps.uvicorn_thread(app)))
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


def browser(base: str) -> httpx.Client:
    return httpx.Client(base_url=base, timeout=15)


def test_a_session_written_on_one_instance_is_read_on_the_other(apps: Any, target: Any) -> None:
    (one, _), (base_one, base_two) = apps
    with browser(base_one) as user:
        response = user.get("/put?colour=blue&size=9")
        cookie = response.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Secure" not in cookie
        session_id = user.cookies["session"]
        assert _ids.is_valid(session_id)
        # Every key of the session carries its id's hash tag.
        (key,) = target.keys("seawall:session:*")
        assert key == _ids.key("seawall:session", session_id)
        assert session_id.split(".")[1] not in key
        other = httpx.Client(base_url=base_two, cookies={"session": session_id})
        assert other.get("/").json()["data"] == {"colour": "blue", "size": "9"}
        # Round trips: a read is one, a write to an existing session two, a new one one.
        # (Scripts loaded on every node first: a node's first EVALSHA of a script is
        # answered NOSCRIPT and followed by one EVAL, once per node and script.)
        for name in ("session_load", "session_save"):
            target.sync().script_load(_scripts.load("seawall.sessions", name).source)
        one.sent.clear()
        user.get("/")
        assert one.sent == ["EVALSHA"]
        one.sent.clear()
        user.get("/put?colour=red")
        assert one.sent == ["EVALSHA", "EVALSHA"]
        one.sent.clear()
        with browser(base_one) as newcomer:
            newcomer.get("/put?a=1")
        assert one.sent == ["EVALSHA"]
        other.close()


def test_parallel_requests_touching_different_fields_keep_both(apps: Any) -> None:
    _, (base_one, base_two) = apps
    with browser(base_one) as user:
        user.get("/put?start=1")
        cookies = {"session": user.cookies["session"]}
        # Both requests load the session before either saves (a barrier of 2 in each app
        # instance would deadlock across instances: both go to instance one).
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            futures = [
                pool.submit(httpx.get, f"{base_one}/put?wait=2&{field}=1", cookies=cookies)
                for field in ("left", "right")
            ]
            assert [f.result(timeout=20).status_code for f in futures] == [200, 200]
        with browser(base_two) as again:
            again.cookies.set("session", cookies["session"])
            assert again.get("/").json()["data"] == {"start": "1", "left": "1", "right": "1"}
        # Each fits the limit (2000 bytes) alone, not both together: the second to save
        # is refused by the script (HTTP 500), and writes nothing.
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            futures = [
                pool.submit(
                    httpx.get, f"{base_one}/put?wait=2&{field}={'x' * 1200}", cookies=cookies
                )
                for field in ("big1", "big2")
            ]
            codes = sorted(f.result(timeout=20).status_code for f in futures)
        assert codes == [200, 500]
        data = user.get("/").json()["data"]
        assert len([name for name in data if name.startswith("big")]) == 1


def test_regenerate_at_login_kills_the_old_id(apps: Any) -> None:
    _, (base_one, base_two) = apps
    with browser(base_one) as user:
        user.get("/put?cart=3")
        before = user.cookies["session"]
        user.get("/login?user=alice")
        after = user.cookies["session"]
        # Bound at login: the new id has its user's tag, the slot of the user's index.
        assert after != before and _ids.tag_of(after) == _ids.user_tag("alice")
        assert user.get("/").json() == {"data": {"cart": "3", "user": "alice"}, "user": "alice"}
    with httpx.Client(base_url=base_two, cookies={"session": before}) as attacker:
        response = attacker.get("/")
        assert response.json() == {"data": {}, "user": None}
        assert "Max-Age=0" in response.headers["set-cookie"]


def test_logout_everywhere_ends_every_session_of_that_user_only(apps: Any) -> None:
    _, (base_one, base_two) = apps
    with browser(base_one) as phone, browser(base_two) as laptop, browser(base_one) as bob:
        phone.get("/login?user=alice")
        laptop.get("/login?user=alice")
        bob.get("/login?user=bob")
        assert phone.get("/everywhere?user=alice").json() == {"ended": 2}
        for device in (phone, laptop):
            assert device.get("/").json() == {"data": {}, "user": None}
        assert bob.get("/").json()["user"] == "bob"
        bob.get("/logout")
        assert "session" not in bob.cookies
        assert bob.get("/").json() == {"data": {}, "user": None}


def test_unknown_forged_and_malformed_ids_get_a_new_empty_session(apps: Any) -> None:
    _, (base_one, _) = apps
    with browser(base_one) as victim:
        victim.get("/put?secret=1")
        real = victim.cookies["session"]
    forged = [_ids.new_id(), real[:-1] + ("A" if real[-1] != "A" else "B"), "x", "a" * 500]
    for value in forged:
        with httpx.Client(base_url=base_one, cookies={"session": value}) as visitor:
            response = visitor.get("/")
            assert response.status_code == 200
            assert response.json() == {"data": {}, "user": None}
            response = visitor.get("/put?mine=1")
            assert response.cookies["session"] not in (value, real)


def test_bad_values_sizes_and_late_writes_fail_loudly_and_write_nothing(apps: Any) -> None:
    _, (base_one, _) = apps
    with browser(base_one) as user:
        user.get("/put?keep=1")
        refused = user.get("/put-object").json()
        assert refused["error"] == "SessionValueError" and "'when'" in refused["message"]
        refused = user.get("/put?big=" + "x" * 3000).json()
        assert refused["error"] == "SessionTooLarge"
        assert "'big'" in refused["message"] and "limit of 2000" in refused["message"]
        # Grown in place: found when the response starts, before anything is written.
        # Starlette answers 500 (no "Connection: close") and re-raises, and uvicorn then
        # drops the connection: a loaded run reused it for the next request and got
        # ECONNRESET, so this request asks for its connection not to be kept.
        assert user.get("/grow?n=40", headers={"Connection": "close"}).status_code == 500
        assert user.get("/").json()["data"] == {"keep": "1"}
        user.get("/write-late")
        assert user.get("/late-error").json() == {"late": "SessionClosed"}
        assert user.get("/").json()["data"] == {"keep": "1", "before": "1"}
        user.get("/drop?name=keep")
        assert user.get("/").json()["data"] == {"before": "1"}


def test_sliding_and_absolute_expiry(apps: Any, target: Any) -> None:
    _, (base_one, _) = apps
    admin = target.sync()
    with browser(base_one) as user:
        user.get("/put?a=1")
        (key,) = target.keys("seawall:session:*")
        assert 90_000 < admin.pttl(key) <= 100_000
        admin.pexpire(key, 5000)
        user.get("/")
        assert 90_000 < admin.pttl(key) <= 100_000  # a read slid it back to max_age
        # 30 days (the absolute lifetime) after the id was issued, however busy:
        created = int(admin.hget(key, "m:created"))
        admin.hset(key, "m:created", created - 30 * 86_400_000 + 2000)
        user.get("/")
        assert 0 < admin.pttl(key) <= 2000  # what is left of the absolute lifetime
        admin.hset(key, "m:created", created - 30 * 86_400_000)
        response = user.get("/")
        assert response.json()["data"] == {} and "Max-Age=0" in response.headers["set-cookie"]
        assert target.keys("seawall:session:*") == []


def test_redis_down_is_a_500_never_an_empty_session() -> None:
    with sessionapps.free_socket() as closed:
        port = closed.getsockname()[1]
    client = sessionapps.async_client(f"redis://127.0.0.1:{port}", cluster=False)
    app = sessionapps.starlette_app(client)
    with sessionapps.uvicorn_thread(app) as base:
        with httpx.Client(base_url=base, cookies={"session": _ids.new_id()}) as user:
            assert user.get("/").status_code == 500
        with httpx.Client(base_url=base) as user:
            # No cookie: nothing to load; the write is what fails.
            assert user.get("/").status_code == 200
            assert user.get("/put?a=1").status_code == 500


def test_the_cookie_is_secure_over_https(seawall_server: Any) -> None:
    async def main() -> str:
        client = sessionapps.async_client(seawall_server.url, cluster=False)
        app = sessionapps.starlette_app(client)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="https://app") as user:
            response = await user.get("/put?a=1")
        await client.aclose()
        return response.headers["set-cookie"]

    cookie = asyncio.run(main())
    assert "; Secure" in cookie and "HttpOnly" in cookie


def in_process(url: str, scenario: Any, **options: Any) -> Any:
    """Run `scenario(user, client, app)` against the Starlette app called in-process."""

    async def main() -> Any:
        client = sessionapps.async_client(url, cluster=False)
        await client.flushdb()
        app = sessionapps.starlette_app(client, **options)
        transport = httpx.ASGITransport(app=app)
        try:
            async with httpx.AsyncClient(transport=transport, base_url="http://app") as user:
                return await scenario(user, client, app)
        finally:
            await client.aclose()

    return asyncio.run(main())


def test_responses_that_depend_on_the_session_vary_on_cookie(seawall_server: Any) -> None:
    async def scenario(user: httpx.AsyncClient, client: Any, app: Any) -> None:
        response = await user.get("/put?a=1")
        assert "set-cookie" in response.headers and response.headers["vary"] == "Cookie"
        response = await user.get("/")  # a read: no cookie, the page still depends on it
        assert "set-cookie" not in response.headers and response.headers["vary"] == "Cookie"

    in_process(seawall_server.url, scenario)


def test_a_read_in_flight_during_a_login_does_not_send_back_the_old_id(
    seawall_server: Any,
) -> None:
    """A page that polls: its request loaded the session before a login regenerated it,
    and answers after. Its response must not put the old, deleted id back."""

    async def scenario(user: httpx.AsyncClient, client: Any, app: Any) -> None:
        await user.get("/put?cart=3")
        before = user.cookies["session"]
        polling = asyncio.create_task(user.get("/hold"))
        while app.state.requests["hold"] is None:  # until /hold has loaded the session
            await asyncio.sleep(0.005)
        await user.get("/login?user=alice")
        after = user.cookies["session"]
        assert after != before
        await user.get("/release")
        late = await polling
        assert late.json()["data"] == {"cart": "3"}
        assert "set-cookie" not in late.headers  # neither the old id nor a drop
        assert user.cookies["session"] == after
        assert (await user.get("/")).json()["user"] == "alice"

    in_process(seawall_server.url, scenario)


def test_a_read_resends_the_cookie_once_half_its_max_age_has_passed(
    seawall_server: Any,
) -> None:
    async def scenario(user: httpx.AsyncClient, client: Any, app: Any) -> None:
        await user.get("/put?a=1")
        (key,) = await client.keys("seawall:session:*")
        assert "set-cookie" not in (await user.get("/")).headers
        issued = int(await client.hget(key, "m:issued"))
        await client.hset(key, "m:issued", issued - 51_000)  # max_age is 100 s
        response = await user.get("/")
        assert "Max-Age=100" in response.headers["set-cookie"]
        assert int(await client.hget(key, "m:issued")) > issued - 51_000
        assert "set-cookie" not in (await user.get("/")).headers

    in_process(seawall_server.url, scenario, max_age=100)


def test_the_session_is_a_dict_json_responses_take(seawall_server: Any) -> None:
    async def scenario(user: httpx.AsyncClient, client: Any, app: Any) -> None:
        await user.get("/put?colour=blue&size=9")
        response = await user.get("/json")
        assert response.status_code == 200
        assert response.json() == {"colour": "blue", "size": "9"}

    in_process(seawall_server.url, scenario)


def test_max_age_as_a_timedelta_and_a_browser_session_cookie(seawall_server: Any) -> None:
    async def scenario(user: httpx.AsyncClient, client: Any, app: Any) -> None:
        cookie = (await user.get("/put?a=1")).headers["set-cookie"]
        assert "Max-Age" not in cookie and "Expires" not in cookie
        (key,) = await client.keys("seawall:session:*")
        assert 290_000 < await client.pttl(key) <= 300_000  # Redis still ends it

    in_process(seawall_server.url, scenario, max_age=timedelta(minutes=5), browser_session=True)

    async def persistent(user: httpx.AsyncClient, client: Any, app: Any) -> None:
        cookie = (await user.get("/put?a=1")).headers["set-cookie"]
        assert "Max-Age=300;" in cookie and "Expires=" in cookie

    in_process(seawall_server.url, persistent, max_age=timedelta(minutes=5))


def test_logout_everywhere_never_misses_a_login_saved_at_the_same_moment(
    seawall_server: Any,
) -> None:
    """The logout runs right after the login's save script returns: the login's session
    was saved before the logout began, so the logout must end it."""
    save_sha = _scripts.load("seawall.sessions", "session_save").sha
    save_source = _scripts.load("seawall.sessions", "session_save").source

    class LogoutAfterSave(sessionapps.CountingRedis):
        ended: list[int]

        async def execute_command(self, *args: Any, **options: Any) -> Any:
            reply = await super().execute_command(*args, **options)
            if args[1:2] in ((save_sha,), (save_source,)) and not self.ended:
                admin = redis.asyncio.Redis.from_url(seawall_server.url)
                self.ended.append(await logout_everywhere(admin, "alice"))
                await admin.aclose()
            return reply

    async def main() -> None:
        client = LogoutAfterSave.from_url(seawall_server.url)
        client.ended = []
        await client.flushdb()
        store = AsyncSessionStore(client, SessionOptions())
        session = await store.load(None)
        session["user"] = "alice"
        session.bind_user("alice")
        plan = await store.save(session)
        assert client.ended == [1]
        assert (await store.load(plan.cookie_id)).is_new  # ended by the logout
        await client.aclose()

    asyncio.run(main())


def test_the_user_index_follows_logins_again_and_unbinding(seawall_server: Any) -> None:
    async def scenario(user: httpx.AsyncClient, client: Any, app: Any) -> None:
        index = _ids.user_index_key("seawall:session", "alice")
        await user.get("/login?user=alice")
        first = user.cookies["session"]
        await user.get("/login?user=alice")  # a new id in the same slot: one script
        second = user.cookies["session"]
        assert second != first and _ids.tag_of(second) == _ids.tag_of(first)
        assert await client.smembers(index) == {_ids.handle(second).encode()}
        # clear() unbinds: the session stays (same id), out of alice's index.
        await user.get("/forget")
        assert user.cookies["session"] == second
        assert await client.smembers(index) == set()
        assert await logout_everywhere(client, "alice") == 0
        assert (await user.get("/")).json() == {"data": {"anonymous": "1"}, "user": None}
        # Bound to bob: the session moves to bob's slot, leaving no trace in alice's.
        await user.get("/login?user=bob")
        assert _ids.tag_of(user.cookies["session"]) == _ids.user_tag("bob")
        assert len(await client.keys("seawall:session:{*}:*")) == 1
        assert await logout_everywhere(client, "bob") == 1
        assert (await user.get("/")).json() == {"data": {}, "user": None}

    in_process(seawall_server.url, scenario)
