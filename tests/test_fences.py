"""Fences survive the loss of their counter, and counters expire with idle names.

A counter is lost when Redis evicts it (allkeys-*), on FLUSHALL, or when a failover
promotes a replica that never had it. A counter that restarted at 1 would hand a new holder
a fence below the one a stale holder still carries: the resource would then refuse the new
holder and accept the stale one. seawall restarts a lost counter from the server's clock
(microseconds since the epoch), above every fence issued before (docs/fences.md).
"""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
import redis
from conftest import Target

import seawall
from seawall.shared._keys import lock_keys, lock_keys_of, rwlock_keys, semaphore_keys, tagged

DAY_MS = 86_400_000
EXACT = 2**53  # Lua numbers are doubles: fences must stay below this to be exact


def holds(primitive: Any, times: int) -> list[int]:
    fences = []
    for _ in range(times):
        assert primitive.acquire(blocking=False)
        fences.append(primitive.fence)
        primitive.release()
    return fences


def kinds(client: Any, name: str) -> list[tuple[str, Any, str]]:
    """(label, primitive, its fence counter key) for each primitive with a fence counter."""
    return [
        ("lock", seawall.Lock(client, name, ttl=10.0), lock_keys(name).fence),
        ("rlock", seawall.RLock(client, name, ttl=10.0), lock_keys_of(tagged("rlock", name)).fence),
        (
            "semaphore",
            seawall.Semaphore(client, name, value=2, ttl=10.0),
            semaphore_keys(name).fence,
        ),
        ("rwlock", seawall.RWLock(client, name, ttl=10.0).write(), rwlock_keys(name).fence),
    ]


def test_fences_keep_increasing_after_the_counter_is_lost(target: Target) -> None:
    r = target.sync()
    for label, primitive, counter in kinds(r, "lost"):
        before = holds(primitive, 3)
        assert before == sorted(set(before)), label
        r.delete(counter)  # evicted, or a failover to a replica that never had it
        after = holds(primitive, 2)
        assert after[0] > before[-1], f"{label}: fence went back from {before} to {after}"
        assert after[1] > after[0], label
        assert after[1] < EXACT, label


def test_fences_keep_increasing_after_flushall(standalone: Target) -> None:
    r = standalone.sync()
    for label, primitive, _counter in kinds(r, "flushed"):
        before = holds(primitive, 3)
        r.flushall()
        after = holds(primitive, 1)
        assert after[0] > before[-1], f"{label}: fence went back from {before} to {after}"


def test_fence_counters_expire_with_idle_names(target: Target) -> None:
    r = target.sync()
    for label, primitive, counter in kinds(r, "idle"):
        holds(primitive, 1)
        left = r.pttl(counter)
        # max(1 day, 10 ttls): a day here, as every ttl is 10 s.
        assert DAY_MS - 60_000 < left <= DAY_MS, f"{label}: counter pttl {left}"


def test_a_long_ttl_keeps_its_counter_for_ten_ttls(standalone: Target) -> None:
    r = standalone.sync()
    lock = seawall.Lock(r, "long", ttl=3 * 86_400.0, renew=False)
    holds(lock, 1)
    assert r.pttl(lock_keys("long").fence) > 29 * DAY_MS


def test_a_stale_holder_is_refused_after_the_counter_is_lost(standalone: Target) -> None:
    """The scenario fences exist for, with the counter lost in between: SQL and Redis
    resources both accept the new holder and refuse the stale one."""
    r = standalone.sync()
    for _ in range(3):  # an established name: its fences are past the first few
        holds(seawall.Lock(r, "account:7", ttl=10.0), 1)
    sql = sqlite3.connect(":memory:")
    sql.execute("CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance INTEGER, fence INTEGER)")
    sql.execute("INSERT INTO accounts VALUES (7, 100, 0)")

    def update(balance: int, fence: int) -> bool:
        cursor = sql.execute(
            "UPDATE accounts SET balance = ?, fence = ? WHERE id = 7 AND fence < ?",
            (balance, fence, fence),
        )
        return cursor.rowcount == 1

    stale = seawall.Lock(r, "account:7", ttl=10.0, renew=False)
    assert stale.acquire(blocking=False)
    assert update(110, stale.fence)
    assert seawall.fenced_write(r, "ledger:7", "110", fence=stale.fence)
    # The holder pauses; meanwhile its lease and the fence counter are lost (eviction
    # under allkeys-lru takes any key; a failover to an empty replica takes both).
    r.delete(stale.key, lock_keys("account:7").fence)
    fresh = seawall.Lock(r, "account:7", ttl=10.0)
    assert fresh.acquire(blocking=False)
    assert fresh.fence > stale.fence
    assert update(120, fresh.fence)  # was refused: the new holder's fence had restarted at 1
    assert seawall.fenced_write(r, "ledger:7", "120", fence=fresh.fence)
    assert not update(999, stale.fence)  # the stale holder wakes up and writes late
    assert not seawall.fenced_write(r, "ledger:7", "999", fence=stale.fence)
    assert sql.execute("SELECT balance FROM accounts").fetchone() == (120,)
    assert seawall.fenced_read(r, "ledger:7")[0] == b"120"
    fresh.release()


def test_redlock_fences_survive_counters_lost_on_every_master(
    seawall_master_clients: list[redis.Redis],
) -> None:
    for admin in seawall_master_clients:
        admin.flushall()
    lock = seawall.Redlock(seawall_master_clients, "lost", ttl=10.0)
    before = holds(lock, 3)
    for admin in seawall_master_clients:
        admin.flushall()  # every master restarted without persistence
    # Another process: it has not seen the earlier fences (this object keeps the highest
    # it saw as a floor, which would hide a counter that restarted at 1).
    after = holds(seawall.Redlock(seawall_master_clients, "lost", ttl=10.0), 1)
    assert after[0] > before[-1]
    assert after[0] < EXACT
    for admin in seawall_master_clients:
        left = admin.pttl(f"{lock.key}:fence")
        assert DAY_MS - 60_000 < left <= DAY_MS


@pytest.mark.parametrize("fence", [2**53 - 2, 1_795_465_711_069_760])
def test_fenced_write_keeps_big_fences_exact(standalone: Target, fence: int) -> None:
    r = standalone.sync()
    assert seawall.fenced_write(r, "big", "a", fence=fence)
    assert not seawall.fenced_write(r, "big", "b", fence=fence - 1)
    assert seawall.fenced_read(r, "big") == (b"a", fence)
    assert seawall.fenced_write(r, "big", "c", fence=fence + 1)
    assert seawall.fenced_read(r, "big") == (b"c", fence + 1)


def test_fenced_write_refuses_a_fence_it_cannot_compare_exactly(standalone: Target) -> None:
    with pytest.raises(ValueError, match="below 2"):
        seawall.fenced_write(standalone.sync(), "big", "x", fence=2**53)
