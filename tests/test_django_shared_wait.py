"""begin_load(), the cache middleware's lease on a page: the callers of one process that
miss a page while another renders it share one wait for its lease, so a page that many
requests of a process miss together costs that process one lease script, not one each.
Sync (threads) and asyncio (tasks), against a real Redis."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from typing import Any

import djangoworkers
from cacheworld import requests_sent
from waiting import wait_until

djangoworkers.setup("redis://unused", "django.core.cache.backends.locmem.LocMemCache")

from seawall.django import RedisCache  # noqa: E402
from seawall.django._async import store as async_store  # noqa: E402
from seawall.django._sync import store as sync_store  # noqa: E402

JOINERS = 20


def _shared_wait(waits: dict[Any, Any], lease_key: str) -> Any:
    """The event of the wait of this process for `lease_key`, once a caller waits."""
    for (_, _, lease), (event, _) in list(waits.items()):
        if lease == lease_key:
            return event
    return None


def _lease_scripts(heads: list[bytes], key: str) -> int:
    return sum(1 for head in heads if b"EVALSHA" in head and key.encode() in head)


def test_threads_that_miss_one_page_share_one_wait(seawall_url: str) -> None:
    cache = RedisCache(seawall_url, {"OPTIONS": {"lease": 60.0}})
    key = f"page-{uuid.uuid4().hex[:8]}"
    token = cache.begin_load(key)  # this thread renders the page
    assert token is not None
    lease_key = sync_store.flight_keys(cache.make_key(key))[1]
    answers: list[Any] = []

    def miss() -> None:
        answers.append(cache.begin_load(key))

    with requests_sent() as sent:
        first = threading.Thread(target=miss)
        first.start()
        wait_until(lambda: _shared_wait(sync_store._waits, lease_key) is not None, 30, "a wait")
        event = _shared_wait(sync_store._waits, lease_key)
        joiners = [threading.Thread(target=miss) for _ in range(JOINERS)]
        for thread in joiners:
            thread.start()
        # Every caller blocked on the one event (CPython's threading.Condition keeps its
        # waiters in _waiters).
        wait_until(lambda: len(event._event._cond._waiters) == JOINERS + 1, 30, "all wait")
        cache.set(key, "the page")
        cache.end_load(key, token)
        for thread in [first, *joiners]:
            thread.join(30)
    assert answers == [None] * (JOINERS + 1), answers
    # The first waiter's lease script and the renderer's end_load: the others sent none.
    assert _lease_scripts(sent.heads, key) == 2, sent.heads
    assert _shared_wait(sync_store._waits, lease_key) is None, "the shared wait outlived it"
    assert cache.get(key) == "the page"


def test_tasks_that_miss_one_page_share_one_wait(seawall_url: str) -> None:
    cache = RedisCache(seawall_url, {"OPTIONS": {"lease": 60.0}})
    key = f"page-{uuid.uuid4().hex[:8]}"
    lease_key = sync_store.flight_keys(cache.make_key(key))[1]

    async def main() -> tuple[list[Any], list[bytes]]:
        token = await cache.abegin_load(key)
        assert token is not None
        with requests_sent() as sent:
            first = asyncio.create_task(cache.abegin_load(key))
            while _shared_wait(async_store._waits, lease_key) is None:
                assert not first.done(), first
                await asyncio.sleep(0.005)
            event = _shared_wait(async_store._waits, lease_key)
            joiners = [asyncio.create_task(cache.abegin_load(key)) for _ in range(JOINERS)]
            while len(event._waiters) < JOINERS + 1:  # every task waits on it
                await asyncio.sleep(0.005)
            await cache.aset(key, "the page")
            await cache.aend_load(key, token)
            answers = await asyncio.wait_for(asyncio.gather(first, *joiners), 30)
        return answers, sent.heads

    answers, heads = asyncio.run(main())
    assert answers == [None] * (JOINERS + 1), answers
    assert _lease_scripts(heads, key) == 2, heads
    assert _shared_wait(async_store._waits, lease_key) is None
    assert cache.get(key) == "the page"


def test_a_shared_wait_ends_with_the_lease_when_nobody_wakes_it(seawall_url: str) -> None:
    # The renderer never ends its load (it died): every caller waiting for it, joined or
    # not, looks again once the lease has run out, and not much later.
    cache = RedisCache(seawall_url, {"OPTIONS": {"lease": 2.0}})
    key = f"page-{uuid.uuid4().hex[:8]}"
    assert cache.begin_load(key) is not None
    lease_key = sync_store.flight_keys(cache.make_key(key))[1]
    answers: list[tuple[Any, float]] = []

    def miss() -> None:
        answers.append((cache.begin_load(key), time.monotonic()))

    started = time.monotonic()
    first = threading.Thread(target=miss)
    first.start()
    wait_until(lambda: _shared_wait(sync_store._waits, lease_key) is not None, 30, "a wait")
    joiners = [threading.Thread(target=miss) for _ in range(5)]
    for thread in joiners:
        thread.start()
    for thread in [first, *joiners]:
        thread.join(30)
    assert [answer for answer, _ in answers] == [None] * 6
    ends = [at - started for _, at in answers]
    # The lease's 2 s (less what passed before the first wait began), plus a margin.
    assert max(ends) < 2.0 + 10.0, ends
    assert min(ends) > 1.0, ends
