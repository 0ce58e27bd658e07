"""Attempts to break seawall.django with the known bugs of django-redis, django-redis-cache
and Django's own RedisCache as a checklist (each test names the issue it comes from)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import djangoworkers
import pytest
import redis

djangoworkers.setup("redis://unused", "django.core.cache.backends.locmem.LocMemCache")

from django.contrib.sessions.backends.base import UpdateError  # noqa: E402
from django.test import override_settings  # noqa: E402

from seawall.django import NotAnInteger, RedisCache  # noqa: E402
from seawall.django.sessions import SessionStore  # noqa: E402


@pytest.fixture
def url(seawall_server: Any) -> Iterator[str]:
    admin = redis.Redis.from_url(seawall_server.url)
    admin.flushdb()
    admin.close()
    yield seawall_server.url


@pytest.fixture
def admin(url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(url)
    yield client
    client.close()


def make(url: str, **params: Any) -> RedisCache:
    options = params.pop("OPTIONS", {})
    return RedisCache(url, {"OPTIONS": options, **params})


# --- get_or_set ---------------------------------------------------------------------


def test_get_or_set_reads_the_versioned_key(url: str) -> None:
    # sebleier/django-redis-cache#122: get_or_set looked up the unversioned key first.
    cache = make(url)
    cache.set("x", "yay", version=2)
    cache.set("x", "boo")
    assert cache.get_or_set("x", lambda: "loaded", version=2) == "yay"
    assert cache.get_or_set("x", lambda: "loaded", version=3) == "loaded"
    assert cache.get("x", version=3) == "loaded"
    assert cache.get("x") == "boo"


def test_get_or_set_applies_its_timeout(url: str, admin: redis.Redis) -> None:
    # sebleier/django-redis-cache#96: get_or_set ignored the timeout (stored for ever).
    cache = make(url, TIMEOUT=300)
    cache.get_or_set("t", lambda: "v", timeout=20)
    assert 0 < admin.pttl(":1:t") <= 20_000
    cache.get_or_set("d", lambda: "v")  # the default TIMEOUT
    assert 20_000 < admin.pttl(":1:d") <= 300_000
    cache.get_or_set("n", lambda: "v", timeout=None)
    assert admin.pttl(":1:n") == -1


def test_get_or_set_non_callable_default(url: str) -> None:
    # sebleier/django-redis-cache#124/#185: a non-callable default must work as Django's.
    cache = make(url)
    assert cache.get_or_set("nc", "plain") == "plain"
    assert cache.get("nc") == "plain"
    assert cache.get_or_set("nc", "other") == "plain"


def test_get_or_set_stores_a_none_result_once(url: str) -> None:
    # django/django#5756 (#25840): get_or_set of None; Django stores None and returns it.
    cache = make(url)
    calls = []
    assert cache.get_or_set("none", lambda: calls.append(1)) is None
    assert cache.get_or_set("none", lambda: calls.append(1)) is None
    assert len(calls) == 1


def test_get_or_set_timeout_zero_returns_the_value_and_leaves_no_lease(url: str) -> None:
    # django-redis#127 / sebleier#136 (0 = do not cache): nothing stored, and the next
    # caller must not wait for a lease left behind.
    cache = make(url, OPTIONS={"lease": 5.0})
    assert cache.get_or_set("z", lambda: "v", timeout=0) == "v"
    assert cache.get("z") is None
    started = time.monotonic()
    assert cache.get_or_set("z", lambda: "w", timeout=0) == "w"
    assert time.monotonic() - started < 1.0


def test_get_or_set_unpicklable_result_gives_the_lease_back(url: str) -> None:
    # A write-back that fails after the callable (pickling) must not hold the lease:
    # cf. django-redis#499 (a failure between steps leaving a bad state).
    cache = make(url, OPTIONS={"lease": 5.0})
    with pytest.raises(TypeError):  # a lock cannot be pickled
        cache.get_or_set("u", lambda: threading.Lock())
    started = time.monotonic()
    assert cache.get_or_set("u", lambda: "ok") == "ok"
    assert time.monotonic() - started < 1.0


def test_aget_or_set_cancelled_gives_the_lease_back(url: str) -> None:
    # The async twin: a request cancelled (client gone) while loading must not make the
    # next request wait out the lease.
    cache = make(url, OPTIONS={"lease": 5.0})

    async def main() -> float:
        async def slow() -> str:
            await asyncio.sleep(10)
            return "never"

        task = asyncio.create_task(cache.aget_or_set("c", slow))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        started = time.monotonic()
        assert await cache.aget_or_set("c", lambda: "fresh") == "fresh"
        return time.monotonic() - started

    assert asyncio.run(main()) < 1.0


def test_get_or_set_keyboardinterrupt_in_callable_gives_the_lease_back(url: str) -> None:
    cache = make(url, OPTIONS={"lease": 5.0})

    def interrupted() -> Any:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cache.get_or_set("ki", interrupted)
    started = time.monotonic()
    assert cache.get_or_set("ki", lambda: "ok") == "ok"
    assert time.monotonic() - started < 1.0


# --- incr / decr --------------------------------------------------------------------


def test_incr_keeps_no_expiry_and_ttl(url: str, admin: redis.Redis) -> None:
    # django-redis#181 (EXISTS then INCR), #499/#524 (incr of a key without timeout).
    cache = make(url)
    cache.set("forever", 1, timeout=None)
    assert cache.incr("forever", 5) == 6
    assert admin.pttl(":1:forever") == -1
    cache.set("ttl", 1, timeout=30)
    assert cache.decr("ttl", 3) == -2
    assert 0 < admin.pttl(":1:ttl") <= 30_000


def test_incr_of_a_missing_key_raises_and_creates_nothing(url: str, admin: redis.Redis) -> None:
    # django-redis#379/#793: incr of a missing key must raise ValueError (Django's API).
    cache = make(url)
    with pytest.raises(ValueError):
        cache.incr("missing")
    assert admin.exists(":1:missing") == 0


def test_incr_beyond_64_bits_keeps_the_value(url: str) -> None:
    # django-redis#524: incr of an int larger than 64 bits (INCRBY refuses it).
    cache = make(url)
    big = 2**70
    cache.set("big", big, timeout=None)
    try:
        result = cache.incr("big")
    except Exception as exc:  # Django's own RedisCache raises ResponseError too
        assert cache.get("big") == big, exc
    else:
        assert result == big + 1
        assert cache.get("big") == big + 1


def test_incr_with_a_float_delta(url: str, admin: redis.Redis) -> None:
    # django-redis#499: incr(key, float) ended with a key of TTL 0 (deleted) or corrupted.
    cache = make(url)
    cache.set("f", 10, timeout=None)
    with pytest.raises((TypeError, ValueError, redis.ResponseError)):
        cache.incr("f", 1.5)
    assert cache.get("f") == 10
    assert admin.pttl(":1:f") == -1


def test_incr_of_a_bool_or_string(url: str) -> None:
    # sebleier#49 (booleans stored as text): True must stay True, "5" must not incr.
    cache = make(url)
    cache.set("b", True)
    assert cache.get("b") is True
    with pytest.raises(NotAnInteger):  # Django's own raises ResponseError, its base
        cache.incr("b")
    assert cache.get("b") is True
    cache.set("s", "5")
    assert cache.get("s") == "5"
    with pytest.raises(NotAnInteger):
        cache.incr("s")
    assert cache.get("s") == "5"


def test_incr_version_of_a_key_without_expiry(url: str) -> None:
    # django-redis#483: incr_version deleted keys stored with timeout=None.
    cache = make(url)
    cache.set("v", "value", timeout=None)
    assert cache.incr_version("v") == 2
    assert cache.get("v", version=2) == "value"
    assert cache.get("v") is None
    assert cache.decr_version("v", version=2) == 1
    assert cache.get("v") == "value"


# --- touch, timeouts ----------------------------------------------------------------


def test_touch_none_persists_and_default_uses_timeout(url: str, admin: redis.Redis) -> None:
    # django-redis#408: touch() defaulted to None instead of the default timeout, and
    # refused None.
    cache = make(url, TIMEOUT=100)
    cache.set("t", 1, timeout=5)
    assert cache.touch("t", None) is True
    assert admin.pttl(":1:t") == -1
    assert cache.touch("t") is True
    assert 5_000 < admin.pttl(":1:t") <= 100_000
    assert cache.touch("missing", None) is False
    assert cache.touch("t", 0) is True
    assert cache.get("t") is None


def test_a_sub_millisecond_timeout_is_not_an_error(url: str) -> None:
    # django-redis#267: PX 0 ("invalid expire time") for a timeout under 1 ms.
    cache = make(url)
    cache.set("tiny", 1, timeout=0.0004)
    cache.set_many({"tiny2": 1}, timeout=0.0004)
    assert cache.add("tiny3", 1, timeout=0.0004) is True
    cache.get_or_set("tiny4", lambda: 1, timeout=0.0004)


def test_set_many_with_timeout_zero_or_negative_deletes(url: str) -> None:
    # django-redis#60/#127: 0 and negative timeouts mean "expire at once".
    cache = make(url)
    cache.set_many({"a": 1, "b": 2})
    assert cache.set_many({"a": 10, "b": 20}, timeout=0) == []
    assert cache.get_many(["a", "b"]) == {}
    cache.set("c", 1)
    cache.set("c", 2, timeout=-5)
    assert cache.get("c") is None
    assert cache.add("c", 3, timeout=-1) is True  # django-redis#293
    assert cache.get("c") is None


def test_set_many_uses_the_default_timeout(url: str, admin: redis.Redis) -> None:
    # sebleier#106: set_many stored keys without expiry.
    cache = make(url, TIMEOUT=50)
    cache.set_many({"x": 1, "y": "two"})
    assert 0 < admin.pttl(":1:x") <= 50_000
    assert 0 < admin.pttl(":1:y") <= 50_000


def test_set_many_and_get_many_with_version(url: str) -> None:
    # sebleier#102: set_many ignored the version.
    cache = make(url)
    cache.set_many({"k": 1}, version=7)
    assert cache.get("k") is None
    assert cache.get_many(["k"], version=7) == {"k": 1}


# --- delete_many / set_many with nothing ---------------------------------------------


def test_empty_delete_many_and_set_many(url: str) -> None:
    # django/django#15825 (ticket 33826): crash on an empty list; django-redis#162:
    # an empty generator.
    cache = make(url)
    cache.delete_many([])
    cache.delete_many(k for k in [])
    assert cache.set_many({}) == []
    assert cache.get_many([]) == {}
    assert cache.get_many(k for k in []) == {}

    async def both() -> None:
        await cache.adelete_many([])
        await cache.adelete_many(k for k in [])
        assert await cache.aset_many({}) == []
        assert await cache.aget_many([]) == {}

    asyncio.run(both())


def test_delete_many_with_a_generator(url: str) -> None:
    cache = make(url)
    cache.set_many({"g1": 1, "g2": 2})
    cache.delete_many(k for k in ["g1", "g2"])
    assert cache.get_many(["g1", "g2"]) == {}


# --- clear --------------------------------------------------------------------------


def test_clear_escapes_glob_characters_of_the_prefix(url: str, admin: redis.Redis) -> None:
    # django-redis#277: a KEY_PREFIX with * was used as a glob pattern.
    cache = make(url, KEY_PREFIX="a*b")
    admin.set("aXXb:1:other", "keep")
    cache.set("mine", 1)
    cache.clear()
    assert cache.get("mine") is None
    assert admin.get("aXXb:1:other") == b"keep"


def test_clear_spares_a_cache_whose_prefix_extends_this_one(url: str) -> None:
    # django-redis#168/#245 (clear ignoring KEY_PREFIX): docs/django.md says clear()
    # deletes "this cache's keys only"; KEY_PREFIX "site" vs "site:admin".
    site = make(url, KEY_PREFIX="site")
    other = make(url, KEY_PREFIX="site:admin")
    other.set("k", "other's")
    site.set("k", "site's")
    site.clear()
    assert site.get("k") is None
    assert other.get("k") == "other's"


def test_clear_with_prefix_seawall_spares_sessions(url: str, admin: redis.Redis) -> None:
    # openedx-platform#32984 (sessions lost on cache clear): KEY_PREFIX "seawall" makes
    # clear_prefix "seawall:", the prefix of the sessions' keys.
    backend = {"BACKEND": "seawall.django.RedisCache", "LOCATION": url, "KEY_PREFIX": "seawall"}
    with override_settings(CACHES={"default": backend}):
        from django.core.cache import caches

        session = SessionStore()
        session["user"] = 42
        session.save()
        key = session.session_key
        caches["default"].clear()
        assert dict(SessionStore(key).items()) == {"user": 42}


def test_clear_with_empty_prefix_spares_foreign_keys(url: str, admin: redis.Redis) -> None:
    # Django's RedisCache runs FLUSHDB (django-redis#168): default KEY_PREFIX "".
    cache = make(url)
    admin.set("foreign", "keep")
    cache.set("k", 1)
    cache.clear()
    assert cache.get("k") is None
    assert admin.get("foreign") == b"keep"


# --- L1 across instances ------------------------------------------------------------


def test_l1_copy_dropped_by_a_delete_from_a_cache_without_l1(url: str) -> None:
    # Two caches on the same Redis in one process, only one with an L1: a delete from
    # the other must not leave the L1 serving the deleted value (cf. django-redis
    # "stale read after delete" reports).
    with_l1 = make(url, OPTIONS={"l1_size": 100, "l1_ttl": 30})
    plain = make(url)
    plain.set("k", "old", timeout=None)
    assert with_l1.get("k") == "old"
    plain.delete("k")
    time.sleep(0.3)
    assert with_l1.get("k") is None


def test_l1_has_key_after_expiry(url: str) -> None:
    cache = make(url, OPTIONS={"l1_size": 100, "l1_ttl": 30})
    cache.set("e", 1, timeout=0.3)
    assert cache.get("e") == 1
    time.sleep(0.5)
    assert cache.has_key("e") is False
    assert cache.get("e") is None


# --- Cluster ------------------------------------------------------------------------


def test_cluster_multi_key_operations_across_slots(seawall_cluster: Any) -> None:
    # grafana oncall#3496 / django-valkey#90: MGET/DEL/UNLINK CROSSSLOT on a Cluster.
    seawall_cluster.flushall()
    cache = RedisCache(seawall_cluster.url, {"OPTIONS": {"cluster": True}, "TIMEOUT": None})
    data = {f"key{i}": i for i in range(40)}
    assert cache.set_many(data) == []
    assert cache.get_many(list(data)) == data
    cache.set_many(dict.fromkeys(data, "x"), timeout=0)  # a delete_many across slots
    assert cache.get_many(list(data)) == {}
    cache.set_many(data)
    cache.delete_many(list(data), again_after=0.2)
    assert cache.get_many(list(data)) == {}
    cache.set_many(data)
    cache.clear()
    assert cache.get_many(list(data)) == {}


# --- sessions -----------------------------------------------------------------------


@pytest.fixture
def sessions(url: str) -> Iterator[redis.Redis]:
    admin = redis.Redis.from_url(url)
    backend = {"BACKEND": "seawall.django.RedisCache", "LOCATION": url}
    with override_settings(CACHES={"default": backend}):
        yield admin
    admin.close()


def test_cycle_key_before_load_keeps_the_data(sessions: redis.Redis) -> None:
    # django/django#8353 (ticket 28066) and #7031 (ticket 26764): cycle_key() on a
    # session not loaded yet lost its data.
    first = SessionStore()
    first["cart"] = ["book"]
    first.save()
    later = SessionStore(first.session_key)  # not loaded
    later.cycle_key()
    assert later.session_key != first.session_key
    assert dict(SessionStore(later.session_key).items()) == {"cart": ["book"]}
    assert SessionStore().exists(first.session_key) is False


def test_cycle_key_of_an_unsaved_session_then_save(sessions: redis.Redis) -> None:
    session = SessionStore()
    session["a"] = 1
    session.cycle_key()
    session["b"] = 2
    session.save()
    assert dict(SessionStore(session.session_key).items()) == {"a": 1, "b": 2}


def test_cycle_key_with_an_unknown_id(sessions: redis.Redis) -> None:
    # A fixated id never stored (session fixation): cycle_key gives a fresh id.
    session = SessionStore("nonexistent-made-up-id")
    session["a"] = 1
    session.cycle_key()
    assert session.session_key != "nonexistent-made-up-id"
    session.save()
    assert dict(SessionStore(session.session_key).items()) == {"a": 1}


def test_cycle_key_racing_a_save_of_the_old_id(sessions: redis.Redis) -> None:
    # Login in one tab (cycle_key) while another tab saves a change to the old id: the
    # old id must stay dead (not recreated by the other tab's save).
    first = SessionStore()
    first["a"] = 1
    first.save()
    old = first.session_key
    other_tab = SessionStore(old)
    _ = other_tab["a"]
    first.cycle_key()
    first.save()
    other_tab["b"] = 2
    with pytest.raises(UpdateError):  # Django's answer for a session deleted meanwhile
        other_tab.save()
    assert SessionStore().exists(old) is False


def test_session_with_a_past_expiry(sessions: redis.Redis) -> None:
    # django-redis#60 / Django's test_actual_expiry: a negative expiry age must expire
    # the session, not fail with "invalid expire time".
    session = SessionStore()
    session["a"] = 1
    session.set_expiry(-10)
    session.save()
    assert SessionStore(session.session_key).get("a") is None


def test_session_expiry_is_set_on_every_save(sessions: redis.Redis) -> None:
    # A delta write must still refresh the whole session's expiry.
    session = SessionStore()
    session["a"] = 1
    session.set_expiry(5)
    session.save()
    again = SessionStore(session.session_key)
    again.set_expiry(1000)
    again.save()
    keys = [k for k in sessions.keys("*") if b"session" in k]
    assert keys
    assert all(sessions.ttl(k) > 100 for k in keys), [(k, sessions.ttl(k)) for k in keys]


def test_session_save_unmodified_key_expiry_change_only(sessions: redis.Redis) -> None:
    # Only the expiry changes (set_expiry writes _session_expiry): the next load must
    # see it.
    session = SessionStore()
    session["a"] = 1
    session.save()
    again = SessionStore(session.session_key)
    again.set_expiry(3600)
    again.save()
    assert SessionStore(session.session_key).get_expiry_age() == 3600


# --- small API contracts ------------------------------------------------------------


def test_delete_answers_whether_it_deleted(url: str) -> None:
    # Django ticket 32076 (delete() returns a bool), django-redis's delete returning ints.
    cache = make(url)
    cache.set("d", 1)
    assert cache.delete("d") is True
    assert cache.delete("d") is False


def test_non_string_and_duplicate_keys_in_get_many(url: str) -> None:
    cache = make(url)
    cache.set_many({1: "one", 2: "two"})
    assert cache.get_many([1, 2, 2, 3]) == {1: "one", 2: "two"}
    assert cache.get(1) == "one"


def test_has_key_false_while_a_load_is_in_flight(url: str) -> None:
    cache = make(url)
    token = cache.begin_load("h")
    assert token is not None
    assert cache.has_key("h") is False
    assert cache.get("h", "dflt") == "dflt"
    cache.end_load("h", token)


def test_async_twins_of_incr_and_touch(url: str, admin: redis.Redis) -> None:
    cache = make(url)

    async def main() -> None:
        with pytest.raises(ValueError):
            await cache.aincr("missing")
        await cache.aset("n", 1, timeout=10)
        assert await cache.aincr("n", 2) == 3
        assert await cache.atouch("n", None) is True
        assert await cache.adecr("n") == 2

    asyncio.run(main())
    assert admin.pttl(":1:n") == -1
