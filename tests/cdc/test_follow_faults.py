"""At least once, never lost: a frozen Redis holds the checkpoint and the slot back, a
SIGKILLed follower's successor replays what was not checkpointed, a standby takes over
within the election's ttl, a crashed database is followed again after its restart."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

import seawall
from cdc.databases import PostgresDatabase
from cdc.helpers import FollowerProcess, checkpoint_name, in_redis, wait_until
from cdc.mariadb_database import MariaDBDatabase
from seawall.cdc._invalidate import read_checkpoint
from seawall.cdc._pgoutput import parse_lsn
from seawall.launcher._mariadb import MariaDBProcess

ROWS = 60
USERS = "CREATE TABLE users (id INT PRIMARY KEY, email VARCHAR(200) UNIQUE, name VARCHAR(200))"


@pytest.fixture
def followers(tmp_path: Any) -> Iterator[Callable[..., FollowerProcess]]:
    started: list[FollowerProcess] = []

    def start(source_url: str, redis_url: str, *args: str) -> FollowerProcess:
        follower = FollowerProcess(tmp_path, source_url, redis_url, "--map", "users=users", *args)
        started.append(follower)
        return follower

    yield start
    for follower in started:
        follower.stop()
    stuck = [follower.stuck for follower in started if follower.stuck is not None]
    assert not stuck, f"a follower did not stop within 10 s of SIGTERM:\n{stuck[0]}"


def _primed(database: Any, client: redis.Redis, count: int = ROWS) -> None:
    """Rows 1..count in the database and a cached copy of each in Redis."""
    rows = ", ".join(f"({i}, 'u{i}@x', 'old')" for i in range(1, count + 1))
    database.execute(f"INSERT INTO users VALUES {rows}")
    seawall.Cache(client, "users").warm({i: "old" for i in range(1, count + 1)})


def _update(database: Any, ids: range) -> None:
    for i in ids:  # one transaction each
        database.execute("UPDATE users SET name = 'new' WHERE id = %s", i)


def _all_invalidated(client: redis.Redis, ids: range) -> Callable[[], bool]:
    return lambda: not any(in_redis(client, "users", i) for i in ids)


def test_frozen_redis_holds_checkpoint_and_slot_then_the_follower_catches_up(
    pg_database: PostgresDatabase, seawall_server_factory: Any, followers: Any
) -> None:
    database = pg_database  # slot positions: PostgreSQL only
    server = seawall_server_factory()
    client = server.client()
    _primed(database, client)
    follower = followers(database.url, server.url)
    follower.wait_streaming()
    name = checkpoint_name(database.url)
    wait_until(lambda: read_checkpoint(client, name)[1] > 0, 10, "the checkpoint is claimed")
    before = database.confirmed_flush()
    server.pause()
    try:
        _update(database, range(1, ROWS + 1))
        time.sleep(1.5)  # the follower reads the changes and cannot invalidate them
        assert database.confirmed_flush() <= before, "the slot moved past un-invalidated rows"
    finally:
        server.resume()
    wait_until(_all_invalidated(client, range(1, ROWS + 1)), 25, "caught up after SIGCONT")
    wait_until(
        lambda: parse_lsn((read_checkpoint(client, name)[0] or "0/0").split()[0]) > before,
        10,
        "the checkpoint moves once Redis answers",
    )
    wait_until(lambda: database.confirmed_flush() > before, 10, "the slot is confirmed")
    client.close()


def test_frozen_redis_then_the_mariadb_follower_catches_up_to_the_servers_gtid(
    seawall_mariadb: MariaDBProcess, seawall_server_factory: Any, followers: Any
) -> None:
    database = MariaDBDatabase.fresh(seawall_mariadb)
    try:
        database.execute(USERS)
        server = seawall_server_factory()
        client = server.client()
        _primed(database, client)
        follower = followers(database.url, server.url)
        follower.wait_streaming()
        name = checkpoint_name(database.url)
        assert (read_checkpoint(client, name)[0] or "").startswith("gtid:")
        server.pause()
        try:
            _update(database, range(1, ROWS + 1))
            time.sleep(1.5)  # the follower reads the changes and cannot invalidate them
        finally:
            server.resume()
        wait_until(_all_invalidated(client, range(1, ROWS + 1)), 25, "caught up after SIGCONT")
        gtid = f"gtid:{database.execute('SELECT @@GLOBAL.gtid_binlog_pos')[0][0]}"
        wait_until(
            lambda: read_checkpoint(client, name)[0] == gtid, 10, f"the checkpoint is {gtid}"
        )
        client.close()
    finally:
        database.drop()


def test_sigkilled_follower_loses_nothing(database: Any, seawall_url: str, followers: Any) -> None:
    client = redis.Redis.from_url(seawall_url)
    _primed(database, client)
    first = followers(database.url, seawall_url, "--ttl", "2")
    first.wait_streaming()
    _update(database, range(1, ROWS // 2 + 1))
    first.kill()  # mid-stream: it is still invalidating and checkpointing these
    _update(database, range(ROWS // 2 + 1, ROWS + 1))  # while no follower runs
    second = followers(database.url, seawall_url, "--ttl", "2")
    second.wait_streaming()
    wait_until(_all_invalidated(client, range(1, ROWS + 1)), 20, "every change invalidated")
    client.close()


@pytest.mark.serial
def test_standby_takes_over_within_the_ttl_after_sigkill(
    database: Any, seawall_url: str, followers: Any
) -> None:
    client = redis.Redis.from_url(seawall_url)
    _primed(database, client, 2)
    leader = followers(database.url, seawall_url, "--ttl", "1", "-v")
    leader.wait_streaming()
    standby = followers(database.url, seawall_url, "--ttl", "1", "-v")
    wait_until(lambda: "standing by" in standby.log(), 20, f"standby waits:\n{standby.log()}")
    assert "streaming" not in standby.log()
    leader.kill()
    killed = time.monotonic()
    _update(database, range(1, 2))
    try:
        wait_until(_all_invalidated(client, range(1, 2)), 15, "the standby invalidates")
    except AssertionError as exc:  # the log as it is now, not as it was at the kill
        raise AssertionError(f"{exc}; its log:\n{standby.log()}") from None
    took = time.monotonic() - killed
    assert took < 1 + 4, f"took over after {took:.1f} s (ttl 1 s):\n{standby.log()}"
    client.close()


def test_database_crash_and_restart_while_following(
    database: Any, seawall_url: str, run_follower: Any
) -> None:
    database.execute("INSERT INTO users VALUES (1, 'a@x', 'Ann'), (2, 'b@x', 'Bob')")
    client = redis.Redis.from_url(seawall_url)
    users = seawall.Cache(client, "users")
    follower = run_follower(database.url, client, ["users=users"])
    wait_until(lambda: follower.status().streaming, 15, "the follower streams")
    database.execute("UPDATE users SET name = 'Anna' WHERE id = 1")
    users.set(2, "Bob")
    wait_until(lambda: follower.status().row_changes == 1, 10, "the first change is read")
    # The source's read raises SourceError; the follower reopens from its checkpoint.
    database.kill()
    database.restart()
    database.execute("UPDATE users SET name = 'Bobby' WHERE id = 2")
    wait_until(lambda: not in_redis(client, "users", 2), 20, "invalidated after the restart")
    assert follower.status().streaming
    client.close()
