"""Leases kept in a sorted set (a semaphore's permits, an RWLock's readers) never end before
their ttl has passed since the script ran, as a key's PX never does.

The scripts read the server's TIME cut to the millisecond and count a lease as over once
that reaches its end: an end of now + ttl could come up to 1 ms early, while the holder,
counting from its send, still held it (the semaphore churn test once saw 4 holders of 3
permits for 0.9 ms that way). TIME and the script run in one transaction here, so the
script's clock is no earlier than the TIME read just before it."""

from __future__ import annotations

import secrets
from typing import Any

from conftest import Target

from seawall.locks._sync import semaphore as semaphore_module
from seawall.shared import _scripts
from seawall.shared._keys import rwlock_keys, semaphore_keys

TTL_MS = 1_000
ROUNDS = 50


def _earliest_end_us(
    r: Any,
    script: _scripts.LuaScript,
    keys: tuple[str, ...],
    args: tuple[Any, ...],
    zset: str,
    token: str,
) -> int:
    """How many microseconds after the TIME read just before the script the lease ends
    (when the scripts' clock, cut to the ms, reaches the stored end)."""
    r.script_load(script.source)
    pipe = r.pipeline(transaction=True)
    pipe.time()
    pipe.evalsha(script.sha, len(keys), *keys, *args)
    (seconds, micros), reply = pipe.execute()
    assert int(reply[0]) == 1, reply
    end_ms = int(r.zscore(zset, token))
    return end_ms * 1000 - (seconds * 1_000_000 + micros)


def test_a_permit_never_ends_before_its_ttl(standalone: Target) -> None:
    r = standalone.sync()
    script = semaphore_module._ACQUIRE
    keys = semaphore_keys("ends")
    shortest = min(
        _earliest_end_us(
            r,
            script,
            (keys.key, keys.fence, keys.waiters, keys.seen),
            (token := secrets.token_hex(8), ROUNDS, TTL_MS),
            keys.key,
            token,
        )
        for _ in range(ROUNDS)
    )
    assert shortest >= TTL_MS * 1000, shortest


def test_a_read_lease_never_ends_before_its_ttl(standalone: Target) -> None:
    r = standalone.sync()
    script = _scripts.load("seawall.locks", "rwlock_read_acquire")
    keys = rwlock_keys("ends")
    acquire_keys = (
        keys.writer,
        keys.readers,
        keys.writers_waiting,
        keys.readers_waiting,
        keys.admitted,
        keys.fence,
    )
    shortest = min(
        _earliest_end_us(
            r,
            script,
            acquire_keys,
            (token := secrets.token_hex(8), TTL_MS),
            keys.readers,
            token,
        )
        for _ in range(ROUNDS)
    )
    assert shortest >= TTL_MS * 1000, shortest
