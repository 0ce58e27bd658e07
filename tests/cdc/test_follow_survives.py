"""A follower never gives up while it runs: deposed (paused past its lease) it stands by
and can lead again; a Redis frozen longer than the lease, or a database down when a
standby is elected, is waited out with backoff, never a reason to exit."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

import seawall
from cdc.helpers import FollowerProcess, in_redis, wait_until


@pytest.fixture
def followers(tmp_path: Any) -> Iterator[Callable[..., FollowerProcess]]:
    started: list[FollowerProcess] = []

    def start(source_url: str, redis_url: str, *args: str) -> FollowerProcess:
        follower = FollowerProcess(tmp_path, source_url, redis_url, "--map", "users=users", *args)
        started.append(follower)
        return follower

    yield start
    for follower in started:
        if follower.proc.poll() is None:
            follower.proc.send_signal(signal.SIGCONT)
        follower.stop()


def _cached(database: Any, client: redis.Redis, ids: range) -> None:
    rows = ", ".join(f"({i}, 'u{i}@x', 'old')" for i in ids)
    database.execute(f"INSERT INTO users VALUES {rows}")
    seawall.Cache(client, "users").warm({i: "old" for i in ids})


def _update(database: Any, ids: range) -> None:
    for i in ids:
        database.execute("UPDATE users SET name = 'new' WHERE id = %s", i)


def _gone(client: redis.Redis, ids: range) -> Callable[[], bool]:
    return lambda: not any(in_redis(client, "users", i) for i in ids)


def _alive(follower: FollowerProcess) -> None:
    assert follower.proc.poll() is None, f"the follower exited:\n{follower.log()}"


def test_a_deposed_leader_stands_by_and_leads_again(
    database: Any, seawall_url: str, followers: Any
) -> None:
    client = redis.Redis.from_url(seawall_url)
    _cached(database, client, range(1, 3))
    first = followers(database.url, seawall_url, "--ttl", "1")
    first.wait_streaming()
    second = followers(database.url, seawall_url, "--ttl", "1")
    wait_until(lambda: "standing by" in second.log(), 20, f"standby waits:\n{second.log()}")
    first.proc.send_signal(signal.SIGSTOP)  # past its 1 s lease: the standby takes over
    try:
        wait_until(lambda: "streaming" in second.log(), 15, f"takes over:\n{second.log()}")
    finally:
        first.proc.send_signal(signal.SIGCONT)
    wait_until(lambda: "deposed" in first.log(), 10, f"deposed:\n{first.log()}")
    time.sleep(1.5)  # it used to exit here, on its next election attempt
    _alive(first)
    second.kill()  # the deposed one must be able to lead again
    _update(database, range(1, 2))
    wait_until(_gone(client, range(1, 2)), 20, f"the first leads again:\n{first.log()}")
    _alive(first)
    client.close()


def test_redis_frozen_longer_than_the_lease_is_waited_out(
    database: Any, seawall_server_factory: Any, followers: Any
) -> None:
    server = seawall_server_factory()
    client = server.client()
    _cached(database, client, range(1, 21))
    follower = followers(database.url, server.url, "--ttl", "1")
    follower.wait_streaming()
    server.pause()
    try:
        _update(database, range(1, 11))
        time.sleep(2.5)  # more than twice the lease
    finally:
        server.resume()
    wait_until(_gone(client, range(1, 11)), 25, f"caught up:\n{follower.log()}")
    _update(database, range(11, 21))
    wait_until(_gone(client, range(11, 21)), 20, f"still following:\n{follower.log()}")
    _alive(follower)
    client.close()


def test_a_standby_elected_while_the_database_is_down_waits_for_it(
    database: Any, seawall_url: str, followers: Any
) -> None:
    client = redis.Redis.from_url(seawall_url)
    _cached(database, client, range(1, 3))
    leader = followers(database.url, seawall_url, "--ttl", "1")
    leader.wait_streaming()
    standby = followers(database.url, seawall_url, "--ttl", "1")
    wait_until(lambda: "standing by" in standby.log(), 20, f"standby waits:\n{standby.log()}")
    database.kill()
    try:
        leader.kill()  # the standby is elected while the database is down
        wait_until(
            lambda: "retrying" in standby.log() or standby.proc.poll() is not None,
            15,
            "the standby is elected and retries",
        )
        _alive(standby)
    finally:
        database.restart()
    _update(database, range(1, 3))
    wait_until(_gone(client, range(1, 3)), 20, f"the standby follows:\n{standby.log()}")
    _alive(standby)
    client.close()


def test_lag_grows_in_status_lines_while_redis_is_frozen(
    pg_database: Any, seawall_server_factory: Any, run_follower: Any
) -> None:
    """The lag is the age of the oldest change not yet invalidated, reported every
    interval even while the follower waits for Redis (not 0 after a quiet interval).
    The follower's own logic: one source is enough."""
    database = pg_database
    server = seawall_server_factory()
    client = redis.Redis.from_url(server.url, socket_timeout=0.3)
    _cached(database, client, range(1, 2))
    seen: list[Any] = []
    follower = run_follower(
        database.url, client, ["users=users"], status_interval=0.2, on_status=seen.append
    )
    wait_until(lambda: follower.status().streaming, 15, "the follower streams")
    server.pause()
    try:
        _update(database, range(1, 2))
        time.sleep(2.5)
        during = [s.lag_seconds for s in seen[-3:]]
    finally:
        server.resume()
    assert during and max(during) > 1.0, f"lag while Redis is frozen: {during}"
    wait_until(lambda: not in_redis(client, "users", 1), 20, "caught up")
    wait_until(lambda: seen[-1].lag_seconds < 1.0, 10, "the lag falls back")
    client.close()
