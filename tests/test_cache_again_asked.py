"""The second-delete sweeper never loses a look asked for while it serves a namespace.

Found by a loaded CI run: a Cache's first look at its schedule (when it registers) was
still in flight when Redis paused and a delete could not be recorded; the delete asked
the sweeper to retry at once, and the look, ending, set the namespace's next look to
"never" over that request. The delete then waited for the listener's next subscription
(or for ever). Here the look is held at that point on purpose, and each kind of request
made meanwhile must survive its end.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Any

import pytest
import redis

import seawall
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
