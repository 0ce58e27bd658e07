"""A renewal stuck on a frozen server must not delay the renewal of a hold elsewhere.

One process holds a lock on server A (ttl 3 s) and one on server B (ttl 1.5 s), so that
A's first renewal (at 1 s) comes due just before B's second one. A is frozen with SIGSTOP.
B's lock must stay renewed (another client cannot take it for 3+ of its ttls), and A's
on_lost must fire within A's ttl plus a margin: each renewal is bounded by its own lease.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
import redis
import redis.asyncio

import seawall
import seawall.aio

TTL = 1.5
TTL_A = 2 * TTL
WATCH = 3.5 * TTL  # how long the healthy lock is watched
LOST_MARGIN = 1.0


def _watch_healthy(server_b: Any, name: str, until: float) -> float | None:
    """Try to take `name` on B from another client until `until`; when it got in, or None."""
    other = redis.Redis.from_url(server_b.url)
    try:
        intruder = seawall.Lock(other, name, ttl=TTL, renew=False)
        while time.monotonic() < until:
            if intruder.acquire(blocking=False):
                return time.monotonic()
            time.sleep(0.05)
        return None
    finally:
        other.close()


@pytest.mark.slow
@pytest.mark.parametrize("socket_timeout", [None, 5.0])
def test_sync_frozen_server_does_not_delay_other_renewals(
    seawall_server_factory: Any, socket_timeout: float | None
) -> None:
    server_a, server_b = seawall_server_factory(), seawall_server_factory()
    ra = redis.Redis.from_url(server_a.url, socket_timeout=socket_timeout)
    rb = redis.Redis.from_url(server_b.url, socket_timeout=socket_timeout)
    lost_a = threading.Event()
    lock_a = seawall.Lock(ra, "a", ttl=TTL_A, on_lost=lambda _: lost_a.set())
    lock_b = seawall.Lock(rb, "b", ttl=TTL)
    try:
        # A first, so A's first renewal comes due just before B's second.
        assert lock_a.acquire()
        assert lock_b.acquire()
        server_a.pause()
        frozen_at = time.monotonic()
        try:
            taken_at = _watch_healthy(server_b, "b", frozen_at + WATCH)
            assert lost_a.wait(max(frozen_at + TTL_A + LOST_MARGIN - time.monotonic(), 0.0)), (
                f"on_lost of the lock on the frozen server did not fire within {TTL_A} s + "
                f"{LOST_MARGIN} s"
            )
        finally:
            server_a.resume()
        assert taken_at is None, (
            f"another client took the lock on the healthy server at "
            f"+{taken_at - frozen_at:.1f} s: its renewal queued behind the frozen one"
        )
        assert lock_b.owned()
        lock_b.release()
    finally:
        ra.close()
        rb.close()


@pytest.mark.slow
@pytest.mark.parametrize("socket_timeout", [None, 5.0])
def test_async_frozen_server_does_not_delay_other_renewals(
    seawall_server_factory: Any, socket_timeout: float | None
) -> None:
    server_a, server_b = seawall_server_factory(), seawall_server_factory()

    async def main() -> tuple[float, float | None, bool]:
        ra = redis.asyncio.Redis.from_url(server_a.url, socket_timeout=socket_timeout)
        rb = redis.asyncio.Redis.from_url(server_b.url, socket_timeout=socket_timeout)
        lost_a = asyncio.Event()
        lock_a = seawall.aio.Lock(ra, "a", ttl=TTL_A, on_lost=lambda _: lost_a.set())
        lock_b = seawall.aio.Lock(rb, "b", ttl=TTL)
        try:
            assert await lock_a.acquire()
            assert await lock_b.acquire()
            server_a.pause()
            frozen_at = time.monotonic()
            try:
                watcher = asyncio.create_task(
                    asyncio.to_thread(_watch_healthy, server_b, "b", frozen_at + WATCH)
                )
                try:
                    left = frozen_at + TTL_A + LOST_MARGIN - time.monotonic()
                    await asyncio.wait_for(lost_a.wait(), left)
                    lost_after = time.monotonic() - frozen_at
                except TimeoutError:
                    lost_after = float("inf")
                taken_at = await watcher
            finally:
                server_a.resume()
            owned = await lock_b.owned()
            if owned:
                await lock_b.release()
            return lost_after, None if taken_at is None else taken_at - frozen_at, owned
        finally:
            await ra.aclose()
            await rb.aclose()

    lost_after, taken_after, owned = asyncio.run(main())
    assert taken_after is None, (
        f"another client took the lock on the healthy server at +{taken_after:.1f} s: its "
        "renewal queued behind the frozen one"
    )
    assert owned
    assert lost_after <= TTL_A + LOST_MARGIN, (
        f"on_lost of the lock on the frozen server did not fire within {TTL_A} s + {LOST_MARGIN} s"
    )


def test_sync_calls_to_a_frozen_server_tie_up_one_thread(seawall_server_factory: Any) -> None:
    """Without socket_timeout a call to a frozen server blocks its thread until the server
    answers. Timed-out tries (acquires, renewal retries, clean-ups) must not each tie up
    one more: a server that went silent gets one request at a time."""
    server = seawall_server_factory()
    r = redis.Redis.from_url(server.url)
    tries = 10

    def node_threads() -> int:
        return sum(1 for t in threading.enumerate() if t.name == "seawall-node")

    try:
        warm = seawall.Lock(r, "warm", renew=False)
        assert warm.acquire(timeout=1.0)
        warm.release()
        before = node_threads()
        server.pause()
        try:
            for n in range(tries):
                assert seawall.Lock(r, f"frozen-{n}", renew=False).acquire(timeout=0.3) is False
            blocked = node_threads() - before
        finally:
            server.resume()
        # The timed-out try itself, one request at a time after it, their clean-ups.
        assert blocked <= 3, f"{blocked} more threads blocked on the frozen server"
    finally:
        r.close()
