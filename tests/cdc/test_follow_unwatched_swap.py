"""A table replaced while no follower watched it (the chaos test found this: the leader
killed within a second of a rename-swap, before it looked at the tables' OIDs).

The publication names tables by OID, so the new table is not in it: its changes until
a follower adds it were never in the stream, and a follower started afterwards sees
the new table's OID as the one it always followed. It must clear the namespace."""

from __future__ import annotations

from typing import Any

import redis

import seawall
from cdc.databases import PostgresDatabase
from cdc.helpers import wait_until
from seawall.cdc._events import SourceError
from seawall.cdc.postgresql import PostgresSource


def test_a_table_swapped_while_no_follower_ran_clears_its_namespace(
    pg_database: PostgresDatabase, seawall_url: str, run_follower: Any, caplog: Any
) -> None:
    database = pg_database
    database.execute("INSERT INTO users VALUES (1, 'a@x', 'Ann')")
    client = redis.Redis.from_url(seawall_url)
    follower = run_follower(database.url, client, ["users=users"])
    wait_until(lambda: follower.status().streaming, 15, "the follower streams")
    database.execute("INSERT INTO users VALUES (2, 'b@x', 'Bob')")
    wait_until(lambda: follower.status().row_changes == 1, 10, "a change is checkpointed")
    follower.stop()
    wait_until(lambda: not follower.status().leader, 10, "stopped")
    # While no follower runs: the rename-swap, then a change of the new table.
    database.execute("CREATE TABLE users_new (LIKE users INCLUDING ALL)")
    database.execute("INSERT INTO users_new SELECT * FROM users")
    database.execute("ALTER TABLE users RENAME TO users_old; ALTER TABLE users_new RENAME TO users")
    database.execute("UPDATE users SET name = 'Anna' WHERE id = 1")  # never in the stream
    users = seawall.Cache(redis.Redis.from_url(seawall_url), "users")
    users.set(1, "Ann")
    again = run_follower(database.url, client, ["users=users"])
    wait_until(lambda: again.status().streaming, 15, "the follower streams again")
    wait_until(lambda: users.get(1) is None, 10, "the stale row is cleared")
    assert "the table was not published" in caplog.text
    # Followed row by row again.
    users.set(2, "Bob")
    database.execute("UPDATE users SET name = 'Bobby' WHERE id = 2")
    wait_until(lambda: users.get(2) is None, 10, "the new table's changes are followed")
    client.close()


def test_a_follower_stopping_between_publishing_and_clearing_a_swap_is_covered(
    pg_database: PostgresDatabase,
    seawall_url: str,
    run_follower: Any,
    monkeypatch: Any,
    caplog: Any,
) -> None:
    """The follower sees the swap, adds the new table to the publication, and its stream
    is lost before the clear (a kill -9 in those milliseconds leaves the same state for
    a successor): the checkpoint still names the old table's OID, so the next open
    clears the namespace. Before, the new table was already published, nothing looked
    different, and the row changed in between stayed cached."""
    database = pg_database
    database.execute("INSERT INTO users VALUES (1, 'a@x', 'Ann')")
    client = redis.Redis.from_url(seawall_url)
    checks = {"lost": 0}
    plain = PostgresSource._check_tables

    def lost_after_publishing(source: PostgresSource) -> Any:
        resets = plain(source)
        if resets and not checks["lost"]:
            checks["lost"] += 1  # published, not yet cleared: the stream goes now
            raise SourceError("the stream was lost between publishing and clearing")
        return resets

    monkeypatch.setattr(PostgresSource, "_check_tables", lost_after_publishing)
    follower = run_follower(database.url, client, ["users=users"])
    wait_until(lambda: follower.status().streaming, 15, "the follower streams")
    database.execute("INSERT INTO users VALUES (2, 'b@x', 'Bob')")
    wait_until(lambda: follower.status().row_changes == 1, 10, "a change is checkpointed")
    users = seawall.Cache(redis.Redis.from_url(seawall_url), "users")
    users.set(1, "Ann")
    # The rename-swap, and a change of the new table before any follower publishes it.
    database.execute("CREATE TABLE users_new (LIKE users INCLUDING ALL)")
    database.execute("INSERT INTO users_new SELECT * FROM users")
    database.execute("ALTER TABLE users RENAME TO users_old; ALTER TABLE users_new RENAME TO users")
    database.execute("UPDATE users SET name = 'Anna' WHERE id = 1")  # never in the stream
    wait_until(lambda: checks["lost"] == 1, 10, "the swap is seen and the stream lost")
    wait_until(lambda: users.get(1) is None, 15, "the stale row is cleared")
    assert "stopped before clearing" in caplog.text
    follower.stop()
    client.close()
