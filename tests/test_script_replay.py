"""Every script is idempotent for its own token: run twice with the same arguments.

redis-py (>= 6) retries a command that timed out or lost its connection; when the first
EVALSHA ran but its reply was lost, the retry runs the script again on the state the first
run made. Each test here runs a script twice with the same ARGV, as such a retry does, and
checks the second run answers what the first did (already granted, released, claimed).
The end-to-end tests at the bottom make redis-py retry for real: the server is frozen with
DEBUG SLEEP right after the command reaches it, so the reply comes after the client's
socket_timeout and redis-py sends the script again.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio
from conftest import Target

import seawall
import seawall.aio
from seawall.cache._codec import cache_keys
from seawall.locks import _lease
from seawall.shared import _scripts
from seawall.shared._keys import (
    WAKE_PREFIX,
    lock_keys,
    rwlock_keys,
    semaphore_keys,
    stock_keys,
    tagged,
)
from seawall.shared._sync.scripts import run_script


def script(name: str) -> _scripts.LuaScript:
    """The script `name`, from the folder of the family that runs it."""
    (path,) = Path(seawall.__file__).parent.glob(f"*/{name}.lua")
    loaded = _scripts.load(f"seawall.{path.parent.name}", name)
    if name.startswith("cache_store"):  # they share cache_write.lua
        return _scripts.with_prelude("cache_write", loaded)
    if name in FENCED:
        return _scripts.with_prelude("fence_counter", loaded)
    return loaded


# The scripts that number holds share fence_counter.lua.
FENCED = {"lock_acquire", "lock_release", "semaphore_acquire", "rwlock_write_acquire"}


def twice(client: Any, name: str, keys: tuple[str, ...], args: tuple[Any, ...]) -> list[Any]:
    return [run_script(client, script(name), keys, args) for _ in range(2)]


def token() -> str:
    return secrets.token_hex(16)


# --- locks -------------------------------------------------------------------------------


def test_lock_acquire_replay_is_granted_with_the_same_fence(standalone: Target) -> None:
    r = standalone.sync()
    keys = lock_keys("replay")
    mine = token()
    first, again = twice(
        r,
        "lock_acquire",
        (keys.key, keys.fence, keys.waiters, keys.throttle, keys.queued),
        (mine, 30_000, "", 5_000, "", ""),
    )
    assert first[0] == 1
    # Granted, same fence (not a ghost lock held by our own token), with what is left of
    # the lease the first run set, which the caller then counts on instead of a full one.
    assert again[:2] == first and 0 < again[2] <= 30_000
    assert r.get(keys.key).decode() == mine


def test_lock_release_replay_says_released(standalone: Target) -> None:
    r = standalone.sync()
    keys = lock_keys("replay")
    mine = token()
    acquire = (keys.key, keys.fence, keys.waiters, keys.throttle, keys.queued)
    run_script(r, script("lock_acquire"), acquire, (mine, 30_000, "", 5_000, "", ""))
    release = (keys.key, keys.waiters, keys.throttle, keys.record(mine), keys.queued)
    args = (mine, WAKE_PREFIX, 20, 1000, 5, "")
    assert twice(r, "lock_release", release, args) == [1, 1]
    assert r.exists(keys.key) == 0
    # The record keeps what was left of the lease (the caller says when that is too short).
    assert 25_000 < r.pttl(keys.record(mine)) <= 30_000


def test_a_release_record_outlasts_a_short_lease_left(standalone: Target) -> None:
    """A release near the end of its lease is still remembered long enough for redis-py's
    retries: the caller asks for RELEASE_MEMORY, and a replay then still says released."""
    r = standalone.sync()
    keys = lock_keys("short")
    mine = token()
    acquire = (keys.key, keys.fence, keys.waiters, keys.throttle, keys.queued)
    run_script(r, script("lock_acquire"), acquire, (mine, 300, "", 5_000, "", ""))
    release = (keys.key, keys.waiters, keys.throttle, keys.record(mine), keys.queued)
    memory = _lease.release_memory_ms(0.3)
    assert memory == str(round(_lease.RELEASE_MEMORY * 1000))
    args = (mine, WAKE_PREFIX, 20, 1000, 5, memory)
    assert run_script(r, script("lock_release"), release, args) == 1
    time.sleep(0.4)  # longer than the lease was
    assert run_script(r, script("lock_release"), release, args) == 1
    assert r.pttl(keys.record(mine)) > 15_000


def test_lock_release_after_a_lost_lease_still_says_not_owned(standalone: Target) -> None:
    """The memory of releases is per token: a lapsed lease is still "not the owner"."""
    r = standalone.sync()
    keys = lock_keys("lapsed")
    mine, theirs = token(), token()
    acquire = (keys.key, keys.fence, keys.waiters, keys.throttle, keys.queued)

    def release(who: str) -> int:
        release_keys = (keys.key, keys.waiters, keys.throttle, keys.record(who), keys.queued)
        args = (who, WAKE_PREFIX, 20, 1000, 5, "")
        return int(run_script(r, script("lock_release"), release_keys, args))

    run_script(r, script("lock_acquire"), acquire, (mine, 30_000, "", 5_000, "", ""))
    r.delete(keys.key)  # our lease lapsed
    run_script(r, script("lock_acquire"), acquire, (theirs, 30_000, "", 5_000, "", ""))
    assert release(mine) == 0
    assert release(theirs) == 1
    assert release(mine) == 0
    assert r.pttl(keys.record(theirs)) > 0  # the memory expires
    assert r.exists(keys.record(mine)) == 0


def test_redlock_scripts_replay(standalone: Target) -> None:
    r = standalone.sync()
    key = tagged("redlock", "replay")
    mine = token()
    first, again = twice(r, "redlock_acquire", (key, f"{key}:fence"), (mine, 30_000, 0))
    assert first[0] == 1 and again == first
    assert twice(r, "redlock_release", (key, f"{key}:released"), (mine,)) == [1, 1]


def test_semaphore_scripts_replay(standalone: Target) -> None:
    r = standalone.sync()
    keys = semaphore_keys("replay")
    mine = token()
    acquire = (keys.key, keys.fence, keys.waiters, keys.seen)
    first, again = twice(r, "semaphore_acquire", acquire, (mine, 1, 30_000, "", 5_000, 5_000, ""))
    assert first[0] == 1
    assert again[0] == 1  # not a ghost permit
    assert again[1] > first[1]  # a fresh fence, still above every earlier one
    assert r.zcard(keys.key) == 1
    release = (*keys.queue, keys.record(mine))
    assert twice(r, "semaphore_release", release, (mine, 1, WAKE_PREFIX, 20_000)) == [1, 1]
    assert r.zcard(keys.key) == 0
    # The record keeps what was left of the lease (about 30 s here), at least 20 s. A
    # lease ends 1 ms past now + ttl (see semaphore_acquire.lua), so a release within the
    # acquire's millisecond leaves 30,001 ms.
    assert 25_000 < r.pttl(keys.record(mine)) <= 30_001


def test_rwlock_write_scripts_replay(standalone: Target) -> None:
    r = standalone.sync()
    keys = rwlock_keys("replay")
    mine = token()
    acquire = (
        keys.writer,
        keys.readers,
        keys.writers_waiting,
        keys.readers_waiting,
        keys.admitted,
        keys.fence,
    )
    first, again = twice(r, "rwlock_write_acquire", acquire, (mine, 30_000, "", 5_000, ""))
    assert first[0] == 1 and again == first
    release = (
        keys.writer,
        keys.writers_waiting,
        keys.readers_waiting,
        keys.admitted,
        keys.record(mine),
    )
    args = (mine, WAKE_PREFIX, keys.read_turn, keys.writer, 1000, 20_000)
    assert twice(r, "rwlock_write_release", release, args) == [1, 1]
    assert 15_000 < r.pttl(keys.record(mine)) <= 20_000


def test_rwlock_read_scripts_replay_while_a_writer_waits(standalone: Target) -> None:
    r = standalone.sync()
    keys = rwlock_keys("replay-read")
    acquire = (
        keys.writer,
        keys.readers,
        keys.writers_waiting,
        keys.readers_waiting,
        keys.admitted,
        keys.fence,
    )
    mine = token()
    first = run_script(r, script("rwlock_read_acquire"), acquire, (mine, 30_000, "", 5_000, ""))
    assert first[0] == 1
    # A writer comes and waits: its intent holds new readers back, not our read hold.
    refused = run_script(
        r, script("rwlock_write_acquire"), acquire, (token(), 30_000, "w1", 5_000, "")
    )
    assert refused[0] == 0
    again = run_script(r, script("rwlock_read_acquire"), acquire, (mine, 30_000, "", 5_000, ""))
    assert again == first
    release = (keys.readers, keys.writers_waiting, keys.record(mine))
    args = (mine, WAKE_PREFIX, keys.writer, 20_000)
    assert twice(r, "rwlock_read_release", release, args) == [1, 1]


# --- cache, Idempotent, fenced writes, stock ---------------------------------------------


def test_cache_fetch_replay_keeps_the_lease(standalone: Target) -> None:
    r = standalone.sync()
    keys = cache_keys("replay", "k")
    mine = token()
    first, again = twice(r, "cache_fetch", keys.all, (mine, 5_000, "", ""))
    assert first == [4]
    assert again == [4]  # still the loader: not a waiter on its own lease


def test_cache_store_replay_says_written(standalone: Target) -> None:
    r = standalone.sync()
    keys = cache_keys("replay", "stored")
    mine = token()
    assert run_script(r, script("cache_fetch"), keys.all, (mine, 5_000, "", ""))[0] == 4
    args = (mine, "payload", 60_000, 10_000, 12, "wake:", "", "", 1024, 1_000)
    assert twice(r, "cache_store", keys.all, args) == [1, 1]
    # A load voided by a delete is still refused, replay or not.
    assert run_script(r, script("cache_fetch"), keys.all, (mine, 5_000, "", "1"))[0] == 2
    r.delete(keys.value, keys.lease, keys.hit)
    assert twice(r, "cache_store", keys.all, args) == [0, 0]


def test_cache_store_many_replay_says_written(standalone: Target) -> None:
    r = standalone.sync()
    entries = [cache_keys("replay", key) for key in ("m1", "m2", "m3")]
    mine = token()
    for entry in entries[:2]:
        assert run_script(r, script("cache_fetch"), entry.all, (mine, 5_000, "", ""))[0] == 4
    keys = tuple(name for entry in entries for name in entry.all)
    args = (mine, 12, "wake:", "", "", 1024, 1_000, "p1", 60_000, 10_000, "", 30_000, 0)
    args += ("p3", 60_000, 10_000)
    # m3 was never leased by `mine`: not written, the others written, replay or not.
    assert twice(r, "cache_store_many", keys, args) == [[1, 1, 0], [1, 1, 0]]
    assert r.get(entries[0].value) == b"10000:12:p1" and r.get(entries[1].value) == b"0:12:"
    assert r.get(entries[2].value) is None
    # Loads voided by a delete are still refused, replay or not.
    for entry in entries[:2]:
        assert run_script(r, script("cache_fetch"), entry.all, (mine, 5_000, "", "1"))[0] == 2
        r.delete(entry.value, entry.lease, entry.hit)
    assert twice(r, "cache_store_many", keys, args) == [[0, 0, 0], [0, 0, 0]]


def test_idempotent_scripts_replay(standalone: Target) -> None:
    r = standalone.sync()
    key = tagged("idempotent", "replay:m1")
    mine = token()
    claims = twice(r, "idempotent_claim", (key,), (mine, 30_000))
    assert [_scripts.reply_text(c[0]) for c in claims] == ["claimed", "claimed"]
    finish = twice(r, "idempotent_finish", (key, f"{key}:wake"), (mine, "done", "42", 60_000))
    assert finish == [1, 1]
    # Another claimant's finish after ours still changes nothing and says so.
    assert (
        run_script(
            r, script("idempotent_finish"), (key, f"{key}:wake"), (token(), "done", "7", 60_000)
        )
        == 0
    )
    assert r.hget(key, "outcome") == b"42"


def test_fenced_write_replay_says_written(standalone: Target) -> None:
    r = standalone.sync()
    assert twice(r, "fenced_write", ("guarded",), (5, "v")) == [1, 1]
    # An equal fence with another value is still refused: one write per hold's value.
    assert run_script(r, script("fenced_write"), ("guarded",), (5, "other")) == 0
    assert run_script(r, script("fenced_write"), ("guarded",), (4, "v")) == 0


def test_stock_take_replay_takes_once(standalone: Target) -> None:
    r = standalone.sync()
    keys = stock_keys("replay")
    put = (keys.onsale, keys.avail, keys.taken, keys.orders)
    run_script(r, script("stock_put"), put, (10, "0"))
    take = (keys.avail, keys.taken, keys.orders, keys.log, keys.onsale)
    assert twice(r, "stock_take", take, ("order-1", 3)) == [1, 2]
    assert int(r.get(keys.avail)) == 7


# --- end to end: redis-py's own retry after a reply that came too late ---------------------


def retrying_client(url: str) -> redis.Redis:
    """A client built as the issue's user built it: redis-py gives it a default Retry."""
    parts = redis.connection.parse_url(url)
    client = redis.Redis(host=parts["host"], port=parts["port"], socket_timeout=0.2)
    assert client.get_retry() is not None  # redis-py >= 6: timeouts are retried
    return client


def retrying_async_client(url: str) -> redis.asyncio.Redis:
    parts = redis.connection.parse_url(url)
    client = redis.asyncio.Redis(host=parts["host"], port=parts["port"], socket_timeout=0.2)
    assert client.get_retry() is not None
    return client


def loaded(holder: Any) -> None:
    """One plain cycle first: the scripts are then cached on the server, so the frozen
    call runs the script itself (not a NOSCRIPT reply followed by EVAL)."""
    assert holder.acquire(blocking=False)
    holder.release()


@contextlib.contextmanager
def frozen_after(url: str, seconds: float = 0.5) -> Iterator[None]:
    """Queue DEBUG SLEEP on the server (without waiting for it), then run the body.

    The command the body sends next is read in the same event-loop turn as the sleep (or a
    later one): either it runs before the sleep and its reply is written after it, or it
    runs after the sleep; both ways it has run before redis-py's retry, which comes after
    the client's socket_timeout (0.2 s). The body must take longer than that: proof that
    the reply came late and redis-py retried.
    """
    parts = redis.connection.parse_url(url)
    connection = redis.Connection(host=parts["host"], port=parts["port"])
    connection.send_command("DEBUG", "SLEEP", str(seconds))
    reader = threading.Thread(target=connection.read_response, daemon=True)
    reader.start()
    started = time.monotonic()
    try:
        yield
        assert time.monotonic() - started > 0.2, "the reply was not late: nothing was retried"
    finally:
        reader.join(10)
        connection.disconnect()


def test_lock_acquire_survives_redis_py_retries(standalone: Target) -> None:
    admin = redis.Redis.from_url(standalone.url)
    client = retrying_client(standalone.url)
    lock = seawall.Lock(client, "e2e-retry", ttl=30.0, renew=False)
    loaded(lock)
    with frozen_after(standalone.url):
        assert lock.acquire(blocking=False)  # was False: a ghost lock under our own token
    assert lock.owned()  # the key holds our token: the first run granted it
    assert int(admin.get(f"{lock.key}:fence")) == lock.fence  # the fence the server issued
    lock.release()
    admin.close()
    client.close()


def test_lock_release_survives_redis_py_retries(standalone: Target) -> None:
    admin = redis.Redis.from_url(standalone.url)
    client = retrying_client(standalone.url)
    lock = seawall.Lock(client, "e2e-retry-release", ttl=30.0, renew=False)
    loaded(lock)
    assert lock.acquire(blocking=False)
    fence = lock.fence
    with frozen_after(standalone.url):
        lock.release()  # was LockNotOwnedError, though the first run released it
    assert admin.exists(lock.key) == 0
    assert lock.acquire(blocking=False) and lock.fence > fence
    lock.release()
    admin.close()
    client.close()


def test_async_lock_survives_redis_py_retries(standalone: Target) -> None:
    admin = redis.Redis.from_url(standalone.url)

    async def scenario() -> None:
        client = retrying_async_client(standalone.url)
        await client.ping()
        lock = seawall.aio.Lock(client, "e2e-retry-aio", ttl=30.0, renew=False)
        assert await lock.acquire(blocking=False)  # loads the scripts (see `loaded`)
        await lock.release()
        with frozen_after(standalone.url):
            assert await lock.acquire(blocking=False)
        with frozen_after(standalone.url):
            await lock.release()
        assert admin.exists(lock.key) == 0
        await client.aclose()

    asyncio.run(scenario())
    admin.close()


@pytest.mark.parametrize("kind", ["semaphore", "write", "read"])
def test_permits_and_sides_survive_redis_py_retries(standalone: Target, kind: str) -> None:
    admin = redis.Redis.from_url(standalone.url)
    client = retrying_client(standalone.url)
    client.ping()
    if kind == "semaphore":
        holder: Any = seawall.Semaphore(client, "e2e-retry", value=1, ttl=30.0, renew=False)
    else:
        rw = seawall.RWLock(client, f"e2e-retry-{kind}", ttl=30.0, renew=False)
        holder = rw.write() if kind == "write" else rw.read()
    loaded(holder)
    with frozen_after(standalone.url):
        assert holder.acquire(blocking=False)
    with frozen_after(standalone.url):
        holder.release()
    assert holder.acquire(blocking=False)  # nothing of ours was left behind
    holder.release()
    admin.close()
    client.close()


def test_idempotent_run_survives_redis_py_retries(standalone: Target) -> None:
    """A replayed claim is the caller's own: it runs the handler at once instead of waiting
    out its own lease (3 s here, 30 s by default). (A cache load is not tested this way:
    its plain MGET goes first and takes the frozen turn; test_cache_fetch_replay_* covers
    the script.)"""
    client = retrying_client(standalone.url)
    once = seawall.Idempotent(client, "e2e", lease=3.0, timeout=10.0)
    once.run("warm-up", lambda: 0)  # the scripts are cached on the server (see `loaded`)
    ran = []
    started = time.monotonic()
    with frozen_after(standalone.url):
        assert once.run("m1", lambda: ran.append(1) or "ok") == "ok"
    assert ran == [1]
    assert time.monotonic() - started < 2.0  # was 3 s: it waited for its own claim
    client.close()
