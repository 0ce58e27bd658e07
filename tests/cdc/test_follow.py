"""The follower invalidates exactly what a row change makes stale: in Redis and in every
process's L1, inserts voiding a cached "absent", key-changing updates both keys."""

from __future__ import annotations

from typing import Any

import prometheus_client
import redis
from conftest import SPAWN

import seawall
from cdc.helpers import in_redis, l1_watcher, wait_until
from seawall.cdc._invalidate import read_checkpoint, write_checkpoint


def _reader(url: str) -> tuple[redis.Redis, seawall.Cache]:
    """A second client with its own L1, as another process would have."""
    client = redis.Redis.from_url(url)
    return client, seawall.Cache(client, "users", ttl=300.0, l1_ttl=120.0)


def test_insert_update_delete_invalidate_l2_and_another_clients_l1(
    database: Any, seawall_url: str, run_follower: Any
) -> None:
    database.execute("INSERT INTO users VALUES (1, 'a@x', 'Ann'), (2, 'b@x', 'Bob')")
    writer = redis.Redis.from_url(seawall_url)
    follower = run_follower(database.url, writer, ["users=users"], status_interval=0.2)
    wait_until(lambda: follower.status().streaming, 15, "the follower streams")
    client, users = _reader(seawall_url)
    row = lambda i: database.execute("SELECT name FROM users WHERE id = %s", i)  # noqa: E731
    assert users.get_or_load(1, lambda: row(1)[0][0]) == "Ann"
    assert users.get_or_load(2, lambda: row(2)[0][0]) == "Bob"
    assert users.get_or_load(3, lambda: None) is None  # cached "absent"
    assert users.get(1) == "Ann"  # served from L1 from now on

    database.execute("UPDATE users SET name = 'Anna' WHERE id = 1")
    wait_until(lambda: users.get_or_load(1, lambda: row(1)[0][0]) == "Anna", 5, "update seen")
    database.execute("DELETE FROM users WHERE id = 2")
    wait_until(lambda: not in_redis(writer, "users", 2), 10, "delete invalidates L2")
    # The other client's L1 hears of it a moment after Redis (the invalidation message).
    wait_until(
        lambda: users.get_or_load(2, lambda: row(2)[0][0] if row(2) else None) is None,
        5,
        "delete reaches the other client's L1",
    )
    database.execute("INSERT INTO users VALUES (3, 'c@x', 'Cy')")
    wait_until(
        lambda: users.get_or_load(3, lambda: row(3)[0][0] if row(3) else None) == "Cy",
        5,
        "insert voids the cached absent",
    )
    # A reader sees the insert's invalidation a moment before the follower counts it.
    wait_until(lambda: follower.status().row_changes >= 3, 10, "the changes are counted")
    status = follower.status()
    assert status.leader and status.position is not None
    client.close()
    writer.close()


def test_update_of_the_mapped_column_invalidates_old_and_new_key(
    database: Any, seawall_url: str, run_follower: Any
) -> None:
    database.execute("INSERT INTO users VALUES (1, 'old@x', 'Ann')")
    if database.kind == "postgresql":  # MariaDB's FULL row image always has the old row
        database.execute("ALTER TABLE users REPLICA IDENTITY FULL")
    writer = redis.Redis.from_url(seawall_url)
    registry = prometheus_client.CollectorRegistry()
    seawall.metrics.register(registry)
    by_email = seawall.Cache(writer, "by_email")
    by_email.set("old@x", "Ann")
    by_email.set("new@x", None)  # "absent", cached before the change
    follower = run_follower(database.url, writer, ["users=by_email:email"])
    wait_until(lambda: follower.status().streaming, 15, "the follower streams")
    database.execute("UPDATE users SET email = 'new@x' WHERE id = 1")
    wait_until(
        lambda: (
            not in_redis(writer, "by_email", "old@x") and not in_redis(writer, "by_email", "new@x")
        ),
        10,
        "both the old and the new email are invalidated",
    )
    labels = {"source": follower.source.name}
    # The keys are gone a moment before the change is counted; the lag gauge is also set
    # every status interval, checkpoint or not: wait for the count.
    wait_until(
        lambda: registry.get_sample_value("seawall_follower_events_total", labels) is not None,
        5,
        "the change is counted after its invalidation",
    )
    wait_until(
        lambda: registry.get_sample_value("seawall_follower_lag_seconds", labels) is not None,
        5,
        "the lag gauge is set after the checkpoint",
    )
    lag = registry.get_sample_value("seawall_follower_lag_seconds", labels)
    changes = registry.get_sample_value("seawall_follower_events_total", labels)
    seawall.metrics.unregister(registry)
    assert changes == 1
    assert lag is not None and 0 <= lag < 10
    writer.close()


def test_another_processes_l1_drops_the_changed_row(
    database: Any, seawall_url: str, run_follower: Any
) -> None:
    database.execute("INSERT INTO users VALUES (7, 'g@x', 'Gil')")
    client = redis.Redis.from_url(seawall_url)
    follower = run_follower(database.url, client, ["users=users"])
    ours, theirs = SPAWN.Pipe()
    watcher = SPAWN.Process(target=l1_watcher, args=(seawall_url, "users", 7, theirs))
    watcher.start()
    try:
        assert ours.poll(30) and ours.recv() == "cached"
        wait_until(lambda: follower.status().streaming, 15, "the follower streams")
        ours.send("go")
        database.execute("UPDATE users SET name = 'Gill' WHERE id = 7")
        assert ours.poll(15) and ours.recv() == 1.0, "the other process's L1 kept the row"
    finally:
        watcher.join(10)
        client.close()


def test_a_deposed_followers_fence_cannot_move_the_checkpoint(seawall_redis: Any) -> None:
    assert write_checkpoint(seawall_redis, "src", "0/10", 5)
    assert write_checkpoint(seawall_redis, "src", "0/20", 5)  # one holder, many moves
    assert write_checkpoint(seawall_redis, "src", "0/20", 9)  # the successor claims it
    assert not write_checkpoint(seawall_redis, "src", "0/99", 5)  # the deposed one
    assert read_checkpoint(seawall_redis, "src") == ("0/20", 9)


def test_one_table_feeds_several_namespaces_from_an_sqlalchemy_url(
    database: Any, seawall_url: str, run_follower: Any
) -> None:
    """A Cache and a QueryCache's row tokens (or two caches keyed differently) fed by one
    table, the application's own SQLAlchemy URL given as it is."""
    database.execute("INSERT INTO users VALUES (1, 'a@x', 'Ann')")
    if database.kind == "postgresql":
        database.execute("ALTER TABLE users REPLICA IDENTITY FULL")
        url = database.url.replace("postgresql://", "postgresql+psycopg://", 1)
    else:
        url = database.url.replace("mysql://", "mysql+pymysql://", 1)
    client = redis.Redis.from_url(seawall_url)
    maps = ["users=users", "users=cards", "users=by_email:email"]
    follower = run_follower(url, client, maps)
    wait_until(lambda: follower.status().streaming, 15, "the follower streams")
    seawall.Cache(client, "users").set(1, "Ann")
    seawall.Cache(client, "cards").set(1, "Ann's card")
    seawall.Cache(client, "by_email").set("a@x", "Ann")
    database.execute("UPDATE users SET name = 'Anna' WHERE id = 1")
    wait_until(
        lambda: (
            not any(
                in_redis(client, ns, key)
                for ns, key in [("users", 1), ("cards", 1), ("by_email", "a@x")]
            )
        ),
        10,
        "every namespace of the table is invalidated",
    )
    client.close()


def test_a_mariadb_table_without_a_primary_key_is_followed_by_a_named_column(
    seawall_mariadb: Any, seawall_url: str, run_follower: Any
) -> None:
    from cdc.mariadb_database import MariaDBDatabase

    database = MariaDBDatabase.fresh(seawall_mariadb)
    try:
        database.execute("CREATE TABLE tags (name VARCHAR(40), hits INT)")
        database.execute("INSERT INTO tags VALUES ('red', 1)")
        client = redis.Redis.from_url(seawall_url)
        follower = run_follower(database.url, client, ["tags=tags:name"])
        wait_until(lambda: follower.status().streaming, 15, "the follower streams")
        seawall.Cache(client, "tags").set("red", 1)
        database.execute("UPDATE tags SET hits = 2 WHERE name = 'red'")
        wait_until(lambda: not in_redis(client, "tags", "red"), 10, "invalidated by name")
        client.close()
    finally:
        database.drop()
