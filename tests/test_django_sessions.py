"""seawall.django.sessions beyond Django's SessionTestsMixin (which test_django_suites.py
runs): parallel requests keep each other's writes, cycle_key() kills the old id in Redis,
Redis never holds a working id."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import djangoworkers
import pytest
import redis

djangoworkers.setup("redis://unused", "django.core.cache.backends.locmem.LocMemCache")

from django.contrib.sessions.backends.cache import SessionStore as DjangosCacheSession  # noqa: E402
from django.core.exceptions import ImproperlyConfigured  # noqa: E402
from django.test import override_settings  # noqa: E402

from seawall.django.sessions import SessionStore  # noqa: E402
from seawall.sessions import _ids  # noqa: E402


@pytest.fixture
def client(seawall_server: Any) -> Iterator[redis.Redis]:
    admin = redis.Redis.from_url(seawall_server.url)
    admin.flushdb()
    backend = {"BACKEND": "seawall.django.RedisCache", "LOCATION": seawall_server.url}
    with override_settings(CACHES={"default": backend}):
        yield admin
    admin.close()


def two_parallel_requests(engine: Any) -> dict[str, Any]:
    """Two requests of one user load the session, change different keys, save in turn."""
    first = engine()
    first["cart"] = ["book"]
    first.save()
    tab_a, tab_b = engine(first.session_key), engine(first.session_key)
    tab_a["cart"] = ["book", "pen"]
    _ = tab_b["cart"]  # both have loaded
    tab_b["theme"] = "dark"
    tab_a.save()
    tab_b.save()
    return dict(engine(first.session_key).items())


def test_parallel_requests_keep_each_others_writes(client: redis.Redis) -> None:
    assert two_parallel_requests(SessionStore) == {"cart": ["book", "pen"], "theme": "dark"}


def test_djangos_cache_engine_loses_one_of_them(client: redis.Redis) -> None:
    # The whole session is written back: the last save erases the first one's change.
    assert two_parallel_requests(DjangosCacheSession) == {"cart": ["book"], "theme": "dark"}


def test_a_key_deleted_in_one_request_is_not_brought_back_by_another(client: redis.Redis) -> None:
    first = SessionStore()
    first.update({"a": 1, "b": 2})
    first.save()
    one, other = SessionStore(first.session_key), SessionStore(first.session_key)
    del one["a"]
    other["b"] = 3
    one.save()
    other.save()
    assert dict(SessionStore(first.session_key).items()) == {"b": 3}


def test_cycle_key_moves_the_data_and_kills_the_old_id_in_redis(client: redis.Redis) -> None:
    session = SessionStore()
    session["user"] = "alice"
    session.save()
    old = session.session_key
    assert old is not None
    old_key = _ids.key("seawall:session", old)
    assert client.exists(old_key)
    session.cycle_key()
    new = session.session_key
    assert new is not None and new != old
    assert not client.exists(old_key)  # a fixated or stolen id is dead now
    assert dict(SessionStore(new).items()) == {"user": "alice"}
    assert _ids.tag_of(new) == _ids.tag_of(old)  # same Cluster slot: one script
    assert SessionStore(old).load() == {}


def test_redis_holds_a_digest_of_the_id_never_the_id(client: redis.Redis) -> None:
    session = SessionStore()
    session["x"] = 1
    session.save()
    names = [name.decode() for name in client.keys("*")]
    assert len(names) == 1
    assert session.session_key not in names[0]
    assert session.session_key.split(".", 1)[1] not in names[0]


def test_an_id_seawall_did_not_issue_is_never_looked_up(client: redis.Redis) -> None:
    client.set("seawall:session:whatever", "x")
    foreign = SessionStore("a" * 32)  # Django's own ids look like this
    assert foreign.load() == {}
    assert foreign.session_key is None
    assert foreign.exists("a" * 32) is False


def test_the_async_methods_write_deltas_too(client: redis.Redis) -> None:
    async def main() -> dict[str, Any]:
        first = SessionStore()
        await first.aset("cart", ["book"])
        await first.asave()
        tab_a, tab_b = SessionStore(first.session_key), SessionStore(first.session_key)
        await tab_a.aset("cart", ["book", "pen"])
        await tab_b.aset("theme", "dark")
        await tab_a.asave()
        await tab_b.asave()
        later = SessionStore(first.session_key)
        seen = dict(await later.aitems())
        await later.acycle_key()
        assert not await later.aexists(first.session_key)
        assert dict(await SessionStore(later.session_key).aitems()) == seen
        return seen

    assert asyncio.run(main()) == {"cart": ["book", "pen"], "theme": "dark"}


def test_a_session_cache_that_is_not_seawalls_is_refused_saying_what_to_do(
    client: redis.Redis,
) -> None:
    locmem = {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    with (
        override_settings(CACHES={"default": locmem}),
        pytest.raises(
            ImproperlyConfigured, match=r"SESSION_CACHE_ALIAS.*seawall\.django\.RedisCache"
        ),
    ):
        SessionStore().save()
