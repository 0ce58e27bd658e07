"""Small waits shared by the follower tests (bounded, woken often: never a fixed sleep)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from seawall._cache_codec import cache_keys


def wait_until(condition: Callable[[], Any], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.02)


def in_redis(client: Any, namespace: str, key: Any) -> bool:
    """Whether Redis (L2) holds an entry (a value or a cached "absent") for `key`."""
    return bool(client.exists(cache_keys(namespace, str(key)).value))
