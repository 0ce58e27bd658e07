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
