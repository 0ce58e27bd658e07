"""PostgreSQL specifics: an idle or filtered slot still frees WAL (the heartbeat), and
the documented least-privilege role follows."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import pytest
import redis

import seawall
from cdc.databases import PostgresDatabase
from cdc.helpers import in_redis, wait_until
from seawall.cdc.postgresql import PostgresSource


@pytest.fixture
def database(pg_database: PostgresDatabase) -> PostgresDatabase:
    """PostgreSQL only here: slots, WAL positions, roles."""
    return pg_database


def _lsn(db: PostgresDatabase) -> int:
    return int(db.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn")[0][0])


def test_filtered_changes_advance_the_slot(
    database: PostgresDatabase, seawall_url: str, run_follower: Any
) -> None:
    database.execute("CREATE TABLE other (id INT PRIMARY KEY)")
    client = redis.Redis.from_url(seawall_url)
    follower = run_follower(database.url, client, ["users=users"])
    wait_until(lambda: follower.status().streaming, 15, "the follower streams")
    start = database.confirmed_flush()
    # Only tables the follower does not follow change, here and in another database.
    for i in range(20):
        database.execute("INSERT INTO other VALUES (%s)", i)
    PostgresDatabase(database.server, "postgres").execute("CREATE TABLE IF NOT EXISTS x (i INT)")
    written = _lsn(database)
    assert written > start
    wait_until(
        lambda: database.confirmed_flush() >= written,
        15,
        "confirmed_flush_lsn passes WAL that holds no followed change",
    )
    assert follower.status().row_changes == 0
    client.close()


def test_the_documented_least_privilege_role_follows(
    database: PostgresDatabase, seawall_url: str, run_follower: Any
) -> None:
    role = f"{database.name}_follower"
    database.execute(f"CREATE ROLE {role} WITH LOGIN REPLICATION")
    try:
        database.execute(f"GRANT SELECT ON public.users TO {role}")
        publication = f"{database.name}_pub"  # the name database.url asks for
        database.execute(f"CREATE PUBLICATION {publication} FOR TABLE public.users")
        database.execute("INSERT INTO users VALUES (1, 'a@x', 'Ann')")
        client = redis.Redis.from_url(seawall_url)
        seawall.Cache(client, "users").set(1, "Ann")
        url = database.url.replace("postgres@", f"{role}@")
        follower = run_follower(url, client, ["users=users"])
        wait_until(lambda: follower.status().streaming, 15, "the follower streams")
        database.execute("UPDATE users SET name = 'Anna' WHERE id = 1")
        wait_until(lambda: not in_redis(client, "users", 1), 10, "invalidated")
        follower.stop()
        wait_until(lambda: not follower.status().streaming, 10, "the follower stops")
        client.close()
    finally:
        database.execute(f"DROP OWNED BY {role}")
        database.execute(f"DROP ROLE {role}")


def test_a_partitioned_table_is_followed_through_its_root_and_restarts(
    database: PostgresDatabase, seawall_url: str, run_follower: Any
) -> None:
    database.execute(
        "CREATE TABLE events (id INT, region TEXT, note TEXT, PRIMARY KEY (id, region)) "
        "PARTITION BY LIST (region)"
    )
    database.execute("CREATE TABLE events_eu PARTITION OF events FOR VALUES IN ('eu')")
    database.execute("CREATE TABLE events_us PARTITION OF events FOR VALUES IN ('us')")
    database.execute("INSERT INTO events VALUES (1, 'eu', 'a'), (2, 'us', 'b')")
    # As an earlier follower created it: partitions' changes under their own names.
    database.execute(f"CREATE PUBLICATION {database.name}_pub FOR TABLE events")
    client = redis.Redis.from_url(seawall_url)
    events = seawall.Cache(client, "events")
    for start in range(2):  # the second start finds the publication and slot in place
        events.warm({"1:eu": "a", "2:us": "b"})
        follower = run_follower(database.url, client, ["events=events"])
        wait_until(
            lambda f=follower: f.status().streaming,
            15,
            f"start {start + 1} streams",
        )
        database.execute("UPDATE events SET note = 'x' WHERE id = 1")
        database.execute("DELETE FROM events WHERE id = 2")
        wait_until(
            lambda: not any(in_redis(client, "events", key) for key in ("1:eu", "2:us")),
            10,
            f"changes of the partitions invalidated (start {start + 1})",
        )
        database.execute("INSERT INTO events VALUES (2, 'us', 'b')")
        follower.stop()
        wait_until(lambda f=follower: not f.status().leader, 10, "stopped")
    client.close()


def test_a_silent_stream_is_noticed_and_reopened(
    database: PostgresDatabase, seawall_url: str, run_follower: Any, caplog: Any
) -> None:
    """The walsender SIGSTOPped: the stream's TCP connection stays up and says nothing,
    as behind a network black hole. Without a reply to its keepalive requests within
    stream_timeout, the follower reconnects (here once the walsender ends)."""
    database.execute("INSERT INTO users VALUES (1, 'a@x', 'Ann')")
    client = redis.Redis.from_url(seawall_url)
    follower = run_follower(database.url + "&stream_timeout=1.5", client, ["users=users"])
    wait_until(lambda: follower.status().streaming, 15, "the follower streams")
    time.sleep(2.0)  # idle past the timeout: the server answers the keepalive requests
    assert "silent" not in caplog.text
    (pid,) = database.execute(
        "SELECT active_pid FROM pg_replication_slots WHERE slot_name = %s", database.slot
    )[0]
    os.kill(pid, signal.SIGSTOP)
    try:
        wait_until(lambda: not follower.status().streaming, 8, "the silence is noticed")
    finally:
        os.kill(pid, signal.SIGCONT)  # it ends now: the follower terminated it
    seawall.Cache(client, "users").set(1, "Ann")
    database.execute("UPDATE users SET name = 'Anna' WHERE id = 1")
    wait_until(lambda: not in_redis(client, "users", 1), 20, "followed again")
    client.close()


def test_key_columns_takes_a_bare_table_name(database: PostgresDatabase) -> None:
    source = PostgresSource(database.url)
    try:
        assert list(source.key_columns("users")) == ["id"]
        assert list(source.key_columns("public.users")) == ["id"]
    finally:
        source.close()


def test_two_spellings_of_one_database_elect_one_follower(
    database: PostgresDatabase, seawall_url: str, run_follower: Any
) -> None:
    """127.0.0.1 and localhost name one server: one election (by the server's system
    identifier), so the second stands by instead of taking the slot's stream away."""
    client = redis.Redis.from_url(seawall_url)
    first = run_follower(database.url, client, ["users=users"])
    wait_until(lambda: first.status().streaming, 15, "the first streams")
    second = run_follower(database.url.replace("127.0.0.1", "localhost"), client, ["users=users"])
    time.sleep(1.0)  # the second used to lead at once, then end the first's stream
    assert first.status().streaming and not second.status().leader
    seawall.Cache(client, "users").set(1, "Ann")
    database.execute("INSERT INTO users VALUES (1, 'a@x', 'Ann')")
    wait_until(lambda: not in_redis(client, "users", 1), 10, "followed")
    first.stop()  # the other spelling takes over, from the same checkpoint
    wait_until(lambda: second.status().streaming, 20, "the second takes over")
    seawall.Cache(client, "users").set(2, "Bob")
    database.execute("INSERT INTO users VALUES (2, 'b@x', 'Bob')")
    wait_until(lambda: not in_redis(client, "users", 2), 10, "followed by the second")
    client.close()


def test_a_checkpoint_kept_under_the_url_spelling_is_still_read(
    database: PostgresDatabase, seawall_url: str, run_follower: Any
) -> None:
    """Checkpoints written before followers keyed them by the server's identity."""
    from seawall.cdc._invalidate import read_checkpoint, write_checkpoint

    client = redis.Redis.from_url(seawall_url)
    old = PostgresSource(database.url).name
    assert write_checkpoint(client, old, "FF/0", 1)  # read, it is a gap: a clear
    users = seawall.Cache(client, "users")
    users.set(1, "stale")
    follower = run_follower(database.url, client, ["users=users"])
    wait_until(lambda: follower.status().streaming, 15, "the follower streams")
    assert users.get(1) is None
    assert read_checkpoint(client, old)[0] == "FF/0"  # left alone
    client.close()
