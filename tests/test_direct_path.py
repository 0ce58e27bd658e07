"""seawall's scripts skip redis-py's per-command hooks only where execute_command would do
nothing more: a client that wraps execute_command, a response callback for EVALSHA and a
single-connection client still go through it; the direct path keeps the client's retry
(a connection killed under it is reconnected), sync and asyncio."""

from __future__ import annotations

import asyncio
from typing import Any

import redis
import redis.asyncio
from conftest import Target
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff

import seawall
import seawall.aio
from seawall.shared import _direct


class _Traced(redis.Redis):
    """A client that wraps every command, as tracing integrations do."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seen: list[str] = []

    def execute_command(self, *args: Any, **options: Any) -> Any:
        self.seen.append(str(args[0]))
        return super().execute_command(*args, **options)


class _AsyncTraced(redis.asyncio.Redis):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seen: list[str] = []

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        self.seen.append(str(args[0]))
        return await super().execute_command(*args, **options)


def test_a_client_that_wraps_execute_command_sees_every_script(standalone: Target) -> None:
    client = _Traced.from_url(standalone.url)
    lock = seawall.Lock(client, "direct-traced", ttl=5.0)
    assert lock.acquire()
    lock.release()
    assert client.seen.count("EVALSHA") == 2, client.seen

    async def run() -> list[str]:
        aclient = _AsyncTraced.from_url(standalone.url)
        alock = seawall.aio.Lock(aclient, "direct-traced-aio", ttl=5.0)
        assert await alock.acquire()
        await alock.release()
        await aclient.aclose()
        return aclient.seen

    assert asyncio.run(run()).count("EVALSHA") == 2


def test_what_takes_the_direct_path_and_what_does_not(standalone: Target) -> None:
    command = ("EVALSHA", "0" * 40, 1, "k")
    plain = redis.Redis.from_url(standalone.url)
    assert _direct.fits(plain, command)
    assert not _direct.fits(plain, ("GET", "k"))  # only seawall's script runs
    assert not _direct.fits(_Traced.from_url(standalone.url), command)
    single = redis.Redis.from_url(standalone.url, single_connection_client=True)
    assert not _direct.fits(single, command)
    called = redis.Redis.from_url(standalone.url)
    called.set_response_callback("EVALSHA", lambda reply, **options: reply)
    assert not _direct.fits(called, command)
    assert _direct.async_fits(redis.asyncio.Redis.from_url(standalone.url), command)
    assert not _direct.async_fits(_AsyncTraced.from_url(standalone.url), command)
    single.close()


def test_a_response_callback_for_evalsha_is_applied(standalone: Target) -> None:
    client = redis.Redis.from_url(standalone.url)
    replies: list[Any] = []

    def keep(reply: Any, **options: Any) -> Any:
        replies.append(reply)
        return reply

    client.set_response_callback("EVALSHA", keep)
    lock = seawall.Lock(client, "direct-callback", ttl=5.0)
    assert lock.acquire()
    lock.release()
    assert len(replies) == 2, replies


def _kill_others(admin: redis.Redis) -> int:
    """Close every client connection but the admin's own."""
    return int(admin.execute_command("CLIENT", "KILL", "SKIPME", "yes", "TYPE", "normal"))


def test_a_killed_connection_is_retried_as_redis_py_would(standalone: Target) -> None:
    """As execute_command does: the sync client's default Retry reconnects; an asyncio
    client does when given one."""
    admin = redis.Redis.from_url(standalone.url)
    client = redis.Redis.from_url(standalone.url)
    lock = seawall.Lock(client, "direct-killed", ttl=5.0)
    assert lock.acquire()
    lock.release()
    assert _kill_others(admin) >= 1  # the lock's pooled connection is dead now
    assert lock.acquire()  # the send or the read fails, the retry reconnects
    lock.release()

    async def run() -> None:
        # redis.asyncio retries only when told to (its execute_command raises here
        # otherwise, and so does the direct path): with a Retry, both reconnect.
        aclient = redis.asyncio.Redis.from_url(standalone.url, retry=AsyncRetry(NoBackoff(), 3))
        alock = seawall.aio.Lock(aclient, "direct-killed-aio", ttl=5.0)
        assert await alock.acquire()
        await alock.release()
        assert _kill_others(admin) >= 1
        assert await alock.acquire()
        await alock.release()
        await aclient.aclose()

    asyncio.run(run())
