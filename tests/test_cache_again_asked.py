"""The second-delete sweeper never loses a look asked for while it serves a namespace.

Found by a loaded CI run: a Cache's first look at its schedule (when it registers) was
still in flight when Redis paused and a delete could not be recorded; the delete asked
the sweeper to retry at once, and the look, ending, set the namespace's next look to
"never" over that request. The delete then waited for the listener's next subscription
(or for ever). Here the look is held at that point on purpose, and each kind of request
made meanwhile must survive its end.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis
import redis.asyncio

import seawall
import seawall.aio
from seawall.cache._async.again import IDLE_WAKE, get_sweeper
from seawall.cache._sync.again import AgainSweeper


def serve_while(sweeper: AgainSweeper, cache: Any, meanwhile: Callable[[], None]) -> None:
    """Run one serve of `cache`'s namespace, calling `meanwhile` while its look at the
    schedule (an empty one) is in flight."""
    inside, go_on = threading.Event(), threading.Event()
    real = sweeper._scheduled

    def held(client: Any, key: str) -> bool:
        inside.set()
        assert go_on.wait(10)
        return real(client, key)

    sweeper._scheduled = held  # type: ignore[method-assign]
    serving = threading.Thread(target=sweeper._serve, args=(cache.namespace, cache))
    serving.start()
    assert inside.wait(10)
    meanwhile()
    go_on.set()
    serving.join(10)
    sweeper._scheduled = real  # type: ignore[method-assign]


@pytest.mark.parametrize("request_kind", ["unrecorded", "due_in", "announced"])
def test_a_look_asked_for_during_a_serve_is_kept(seawall_url: str, request_kind: str) -> None:
    client = redis.Redis.from_url(seawall_url)
    cache = seawall.Cache(client, "asked")
    sweeper = AgainSweeper(client)  # a sweeper of its own, no worker: the test serves
    requests: dict[str, Callable[[], None]] = {
        "unrecorded": lambda: sweeper.unrecorded("asked", ["row"], 1.0),
        "due_in": lambda: sweeper.due_in("asked", 0.0),
        "announced": lambda: sweeper.announced(None, 0.0),
    }
    sweeper._next["asked"] = 0.0  # served, as a registered namespace is
    serve_while(sweeper, cache, requests[request_kind])
    # Before the fix: inf (the serve found nothing scheduled and said "never").
    assert sweeper._next["asked"] < math.inf, sweeper._next
    client.close()


def test_a_serve_with_nothing_asked_meanwhile_still_says_never(seawall_url: str) -> None:
    client = redis.Redis.from_url(seawall_url)
    cache = seawall.Cache(client, "quiet")
    sweeper = AgainSweeper(client)
    sweeper._next["quiet"] = 0.0
    serve_while(sweeper, cache, lambda: None)
    assert sweeper._next["quiet"] == math.inf  # an idle namespace costs nothing more
    client.close()


def test_a_sweeper_whose_look_swallowed_its_cancel_still_stops(seawall_url: str) -> None:
    """Found by a loaded CI run: asyncio.run() took 8 s to end after a frozen-Redis test.
    redis-py answered the sweeper's look at the schedule after asyncio.run() had cancelled
    the sweeper's task (it can swallow a cancellation that lands during a read), and the
    sweeper went on to its idle wait of IDLE_WAKE (5 s) before seeing it was asked to stop.
    Here the look swallows the cancel on purpose, as redis-py's read can."""
    inside = asyncio.Event()

    async def body() -> float:
        client = redis.asyncio.Redis.from_url(seawall_url)
        cache = seawall.aio.Cache(client, "swallowed")
        await cache.get("k")  # its first use: the sweeper starts and looks at the schedule
        assert await cache._invalidator_here().wait_listening(10)
        sweeper = get_sweeper(client)
        real = sweeper._scheduled

        async def swallowing(redis_client: Any, key: str) -> bool:
            inside.set()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(30)  # the cancel lands here, and is lost
            return await real(redis_client, key)

        deadline = time.monotonic() + 10
        while sweeper._next.get("swallowed") != math.inf or sweeper._wake.is_set():
            assert time.monotonic() < deadline, "the sweeper's first looks never ended"
            await asyncio.sleep(0.01)  # until the looks asked for so far are over
        sweeper._scheduled = swallowing  # type: ignore[method-assign]
        sweeper.due_in("swallowed", 0.0)  # one more look, which swallows the cancel
        await asyncio.wait_for(inside.wait(), 10)
        (task,) = [t for t in asyncio.all_tasks() if t.get_name() == "seawall-cache-again"]
        started = time.monotonic()
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=IDLE_WAKE + 5)
        took = time.monotonic() - started
        await client.aclose()
        assert done, "the sweeper never stopped"
        return took

    took = asyncio.run(body())
    # Before the fix: IDLE_WAKE (5 s) and a bit.
    assert took < IDLE_WAKE / 2, took
