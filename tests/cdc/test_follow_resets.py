"""Changes the log does not carry row by row (TRUNCATE; on MariaDB, DML logged as a
statement) clear the followed table's cache namespace whole: in Redis and in every
process's L1, never skipped in silence."""

from __future__ import annotations

from typing import Any

import pytest
import redis

import seawall
from cdc.conftest import USERS
from cdc.helpers import wait_until


def _cached_rows(url: str) -> tuple[redis.Redis, seawall.Cache]:
    """Rows 1 and 2 (inserted before the follower started), cached (with an L1) by
    another client, as a reader process would."""
    client = redis.Redis.from_url(url)
    users = seawall.Cache(client, "users", ttl=300.0, l1_ttl=120.0)
    assert users.get_or_load(1, lambda: "Ann") == "Ann"
    assert users.get_or_load(2, lambda: "Bob") == "Bob"
    assert users.get(1) == "Ann"
    return client, users


def test_truncate_clears_the_namespace(
    database: Any, seawall_url: str, run_follower: Any, caplog: Any
) -> None:
    database.execute("INSERT INTO users VALUES (1, 'a@x', 'Ann'), (2, 'b@x', 'Bob')")
    writer = redis.Redis.from_url(seawall_url)
    cleared: list[list[str]] = []  # what on_cleared was told, for copies kept elsewhere
    follower = run_follower(database.url, writer, ["users=users"], on_cleared=cleared.append)
    wait_until(lambda: follower.status().streaming, 15, "the follower streams")
    client, users = _cached_rows(seawall_url)
    database.execute("TRUNCATE TABLE users")
    wait_until(lambda: users.get(1) is None and users.get(2) is None, 10, "TRUNCATE clears")
    # The follower tells on_cleared after the clear, so a reader can see the clear first.
    wait_until(lambda: cleared == [["users"]], 10, "on_cleared is told")
    assert "users: TRUNCATE, not in the log" in caplog.text
    assert "cleared the cache namespace 'users'" in caplog.text
    # Row by row again afterwards.
    users.set(3, "absent before")
    database.execute("INSERT INTO users VALUES (3, 'c@x', 'Cy')")
    wait_until(lambda: users.get(3) is None, 10, "the insert after the truncate")
    client.close()
    writer.close()


@pytest.mark.parametrize("mode", ["STATEMENT", "MIXED"])
def test_a_statement_logged_change_on_mariadb_clears_the_namespace(
    seawall_mariadb: Any, seawall_url: str, run_follower: Any, caplog: Any, mode: str
) -> None:
    from cdc.mariadb_database import MariaDBDatabase

    database = MariaDBDatabase.fresh(seawall_mariadb)
    try:
        database.execute(USERS)
        database.execute("INSERT INTO users VALUES (1, 'a@x', 'Ann'), (2, 'b@x', 'Bob')")
        writer = redis.Redis.from_url(seawall_url)
        follower = run_follower(database.url, writer, ["users=users"])
        wait_until(lambda: follower.status().streaming, 15, "the follower streams")
        client, users = _cached_rows(seawall_url)
        # A session logging statements: one opened before SET GLOBAL binlog_format=ROW,
        # or one that set its own format.
        conn = database.connect()
        with conn.cursor() as cursor:
            cursor.execute(f"SET SESSION binlog_format = '{mode}'")
            cursor.execute("BEGIN")
            cursor.execute("UPDATE users SET name = 'Anna' WHERE id = 1")
            cursor.execute("COMMIT")
        wait_until(lambda: users.get(1) is None and users.get(2) is None, 10, "cleared")
        assert "users: a statement-logged UPDATE, not in the log" in caplog.text
        users.set(2, "Bob")
        with conn.cursor() as cursor:
            cursor.execute(f"DELETE FROM `{database.name}`.`users` WHERE id = 2")
        wait_until(lambda: users.get(2) is None, 10, "a qualified DELETE clears too")
        conn.close()
        client.close()
        writer.close()
    finally:
        database.drop()


def test_a_rename_swap_clears_the_namespace_and_the_new_table_is_followed(
    database: Any, seawall_url: str, run_follower: Any
) -> None:
    database.execute("INSERT INTO users VALUES (1, 'a@x', 'Ann'), (2, 'b@x', 'Bob')")
    database.execute(USERS.replace("users", "users_new"))
    database.execute("INSERT INTO users_new VALUES (1, 'a@x', 'Ann 2'), (2, 'b@x', 'Bob 2')")
    writer = redis.Redis.from_url(seawall_url)
    follower = run_follower(database.url, writer, ["users=users"])
    wait_until(lambda: follower.status().streaming, 15, "the follower streams")
    client, users = _cached_rows(seawall_url)
    if database.kind == "postgresql":
        swap = "ALTER TABLE users RENAME TO users_old; ALTER TABLE users_new RENAME TO users"
    else:
        swap = "RENAME TABLE users TO users_old, users_new TO users"
    database.execute(swap)
    wait_until(lambda: users.get(1) is None and users.get(2) is None, 10, "the swap clears")
    users.set(2, "Bob 2")
    database.execute("UPDATE users SET name = 'Bobby' WHERE id = 2")
    wait_until(lambda: users.get(2) is None, 10, "the new table's changes are followed")
    client.close()
    writer.close()
