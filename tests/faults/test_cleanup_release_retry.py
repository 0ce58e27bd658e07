"""A hold given back in the background (what a cancelled or failed acquire may have been
granted) is released even when the first attempts fail with something other than a
timeout: here the server is SIGKILLed (connections refused) and restarted from its AOF
with the hold still in it. Before, only a TimeoutError was tried again, so a refused
connection (or a redis-py error on a connection that a cancellation left half closed)
left the lock held until its ttl ran out."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import redis
import redis.asyncio

import seawall
import seawall.aio

TTL = 30.0  # far longer than the test: only the background release can free the lock
DOWN = 0.5  # how long the server stays down
FREED_WITHIN = 5.0  # after the restart (the retries back off to 1 s)


def _server(factory: Any) -> Any:
    # appendfsync "no": a SIGKILL still keeps what the server wrote (the OS holds it).
    return factory(appendonly=True, extra_args=["--appendfsync", "no"])


def _crash(server: Any) -> None:
    """SIGKILL the server after a write that must survive it (the hold came before)."""
    admin = server.client()
    try:
        admin.set("written-before-the-crash", 1)
    finally:
        admin.close()
    server.kill()


def _restart_and_wait_until_freed(server: Any, key: str) -> None:
    server.restart()
    restarted = time.monotonic()
    admin = server.client()
    try:
        # The AOF kept what came before the crash (else this test would prove nothing).
        assert admin.exists("written-before-the-crash")
        while admin.exists(key):
            assert time.monotonic() - restarted < FREED_WITHIN, f"{key} is still held"
            time.sleep(0.02)
    finally:
        admin.close()


def test_sync_background_release_outlives_a_refused_connection(
    seawall_server_factory: Any,
) -> None:
    server = _server(seawall_server_factory)
    client = redis.Redis.from_url(server.url)
    try:
        lock = seawall.Lock(client, "given-back", ttl=TTL, renew=False)
        assert lock.acquire()
        token = client.get(lock.key).decode()
        _crash(server)
        lock._release_later(token, "cleanup")  # what a failed try does with its token
        time.sleep(DOWN)  # its first attempts are refused
        _restart_and_wait_until_freed(server, lock.key)
    finally:
        client.close()


def test_async_background_release_outlives_a_refused_connection(
    seawall_server_factory: Any,
) -> None:
    server = _server(seawall_server_factory)

    async def body() -> None:
        client = redis.asyncio.Redis.from_url(server.url)
        try:
            lock = seawall.aio.Lock(client, "given-back", ttl=TTL, renew=False)
            assert await lock.acquire()
            token = (await client.get(lock.key)).decode()
            _crash(server)
            lock._release_later(token, "cleanup")
            await asyncio.sleep(DOWN)
            # In a thread: the background release goes on in this loop meanwhile.
            await asyncio.to_thread(_restart_and_wait_until_freed, server, lock.key)
        finally:
            await client.aclose()

    asyncio.run(body())
