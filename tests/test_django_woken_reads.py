"""The requests of one process woken together by a stored page share its lookup: one GET
of the header list and one of the page for all of them, not two per request; so do the
requests that arrive together for a stored page, each kind with its own. A GET is
shared only with callers whose lookup began before it was sent (seawall/django/_woken.py):
a read that began after a write never gets a value read before it. Against a real Redis;
the rule itself also on ReadFlights alone, where a fetch can be held in flight."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import djangoworkers
import pytest
import redis
from cacheworld import requests_sent
from waiting import wait_until

djangoworkers.setup("redis://unused", "django.core.cache.backends.locmem.LocMemCache")

from django.core.cache import caches  # noqa: E402
from django.http import HttpResponse  # noqa: E402
from django.test import RequestFactory, override_settings  # noqa: E402

from seawall.django import RedisCache, cache_page, middleware  # noqa: E402
from seawall.django._sync import store as sync_store  # noqa: E402
from seawall.django._woken import FIRST, WOKEN, ReadFlights, shared_since  # noqa: E402
from seawall.django.middleware import rendering_key  # noqa: E402

WAITERS = 20


@pytest.fixture
def url(seawall_server: Any) -> Iterator[str]:
    admin = redis.Redis.from_url(seawall_server.url)
    admin.flushdb()
    admin.close()
    backend = {"BACKEND": "seawall.django.RedisCache", "LOCATION": seawall_server.url}
    with override_settings(CACHES={"default": backend}):
        yield seawall_server.url


def _gets(heads: list[bytes], part: bytes) -> int:
    return sum(1 for head in heads if b"GET" in head[:20] and part in head)


def test_requests_woken_by_one_page_share_its_two_gets(url: str) -> None:
    path = f"/woken-{uuid.uuid4().hex[:8]}/"
    rendering = threading.Event()
    release = threading.Event()

    def view(request: Any) -> Any:
        rendering.set()
        assert release.wait(60), "never released"
        return HttpResponse("the page")

    cached = cache_page(60)(view)
    answers: list[bytes] = []

    def request() -> None:
        answers.append(cached(RequestFactory().get(path)).content)

    renderer = threading.Thread(target=request)
    renderer.start()
    assert rendering.wait(30), "the first request never rendered"
    key = caches["default"].make_key(rendering_key("", RequestFactory().get(path)))
    lease = sync_store.flight_keys(key)[1]

    def shared_wait() -> Any:
        # This page's: the waits of other tests of this process are in the table too.
        found = [event for (_, _, of), (event, _) in list(sync_store._waits.items()) if of == lease]
        return found[0] if found else None

    # The first waiter opens this process's wait for the page's lease; those started once it
    # is open join it (started together, some would run the lease script and wait apart).
    waiters = [threading.Thread(target=request) for _ in range(WAITERS)]
    waiters[0].start()
    wait_until(lambda: shared_wait() is not None, 30, "a wait for the lease")
    for thread in waiters[1:]:
        thread.start()
    event = shared_wait()
    try:
        # Every waiter blocked on it (CPython's threading.Condition keeps its waiters in
        # _waiters).
        wait_until(lambda: len(event._event._cond._waiters) == WAITERS, 30, "all waiting")
    except AssertionError:
        release.set()  # no thread is left waiting for the test's end
        raise
    with requests_sent() as sent:
        release.set()
        for thread in [renderer, *waiters]:
            thread.join(60)
    assert answers == [b"the page"] * (WAITERS + 1)
    # After the wake-up: one GET of the header list and one of the page for all 20 (the
    # renderer stored both; it sent no GET after its response).
    assert _gets(sent.heads, b"cache_header") == 1, sent.heads
    assert _gets(sent.heads, b"cache_page") == 1, sent.heads


def test_requests_arriving_together_share_the_lookup_of_a_stored_page(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A burst of requests for a hot page: those that arrived before a GET was sent share
    it. Every request here notes its arrival before any of them looks the page up."""
    path = f"/hot-{uuid.uuid4().hex[:8]}/"
    cached = cache_page(60)(lambda request: HttpResponse("the page"))
    assert cached(RequestFactory().get(path)).content == b"the page"  # stored
    arrived = threading.Barrier(WAITERS)

    def arrival() -> float:
        now = time.monotonic()
        arrived.wait(30)  # the lookups begin once all have arrived
        return now

    monkeypatch.setattr(middleware, "monotonic", arrival)
    answers: list[bytes] = []
    threads = [
        threading.Thread(target=lambda: answers.append(cached(RequestFactory().get(path)).content))
        for _ in range(WAITERS)
    ]
    with requests_sent() as sent:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    assert answers == [b"the page"] * WAITERS
    assert _gets(sent.heads, b"cache_header") == 1, sent.heads
    assert _gets(sent.heads, b"cache_page") == 1, sent.heads


def test_a_woken_lookup_never_joins_the_miss_it_was_woken_from(url: str) -> None:
    """The first lookups' GETs of a page that is then rendered were sent after the waiting
    requests arrived, but before the page was stored: a woken request must read again."""
    cache = caches["default"]
    key = cache.make_key(f"k-{uuid.uuid4().hex[:8]}")
    began = time.monotonic()
    with shared_since(began, FIRST):
        assert cache.get(key) is None  # the miss
    cache.set(key, "stored")
    with requests_sent() as sent, shared_since(began, WOKEN):
        assert cache.get(key) == "stored"
    assert _gets(sent.heads, key.encode()) == 1, sent.heads


def test_a_get_is_joined_only_by_callers_that_began_before_it_was_sent(url: str) -> None:
    cache = RedisCache(url, {})
    key = f"k-{uuid.uuid4().hex[:8]}"
    cache.set(key, "old")
    began = time.monotonic()
    with requests_sent() as sent:
        with shared_since(began):
            assert cache.get(key) == "old"
        cache.set(key, "new")
        with shared_since(began):
            # Began before the first GET was sent: the GET falls inside its lookup.
            assert cache.get(key) == "old"
        with shared_since(time.monotonic()):
            # Began after the write: a GET of its own.
            assert cache.get(key) == "new"
        assert cache.get(key) == "new"  # outside shared_since: never shared
    assert _gets(sent.heads, key.encode()) == 3, sent.heads


# --- ReadFlights alone: a fetch held in flight -----------------------------------------


def test_joiners_wait_for_the_get_in_flight_and_get_its_answer() -> None:
    flights = ReadFlights()
    sent = threading.Event()
    answer = threading.Event()
    fetches: list[str] = []

    def slow() -> bytes:
        fetches.append("leader")
        sent.set()
        assert answer.wait(30)
        return b"value"

    since = time.monotonic()
    results: list[Any] = []
    leader = threading.Thread(target=lambda: results.append(flights.read("k", since, slow, 30)))
    leader.start()
    assert sent.wait(30)
    joiners = [
        threading.Thread(
            target=lambda: results.append(flights.read("k", since, lambda: b"own", 30))
        )
        for _ in range(5)
    ]
    for thread in joiners:
        thread.start()
    answer.set()
    for thread in [leader, *joiners]:
        thread.join(30)
    assert results == [b"value"] * 6
    assert fetches == ["leader"]


def test_a_failed_get_leaves_each_joiner_to_fetch_for_itself() -> None:
    flights = ReadFlights()
    sent = threading.Event()
    fail = threading.Event()

    def failing() -> bytes:
        sent.set()
        assert fail.wait(30)
        raise ConnectionError("down")

    since = time.monotonic()
    errors: list[BaseException] = []

    def lead() -> None:
        try:
            flights.read("k", since, failing, 30)
        except ConnectionError as exc:
            errors.append(exc)

    leader = threading.Thread(target=lead)
    leader.start()
    assert sent.wait(30)
    results: list[Any] = []
    joiner = threading.Thread(
        target=lambda: results.append(flights.read("k", since, lambda: b"own", 30))
    )
    joiner.start()
    fail.set()
    leader.join(30)
    joiner.join(30)
    assert len(errors) == 1 and results == [b"own"]


def test_a_joiner_stops_waiting_after_its_bound() -> None:
    flights = ReadFlights()
    sent = threading.Event()
    never = threading.Event()

    def stuck() -> bytes:
        sent.set()
        never.wait(30)
        return b"late"

    since = time.monotonic()
    leader = threading.Thread(target=lambda: flights.read("k", since, stuck, 30))
    leader.start()
    assert sent.wait(30)
    started = time.monotonic()
    assert flights.read("k", since, lambda: b"own", 0.2) == b"own"
    assert time.monotonic() - started < 10
    never.set()
    leader.join(30)


def test_finished_reads_are_forgotten_once_older_than_kept() -> None:
    flights = ReadFlights()
    since = time.monotonic() - 60
    for n in range(300):
        flights.read(f"k{n}", since, lambda: b"v", 1)
    # Not forgotten yet: all were read within KEEP_SECONDS.
    assert len(flights._reads) == 300
    for read in flights._reads.values():
        read.sent -= 60
    flights.read("k7", time.monotonic(), lambda: b"v", 1)  # read again: kept, last now
    flights.read("one more", since, lambda: b"v", 1)
    assert list(flights._reads) == ["k7", "one more"]
