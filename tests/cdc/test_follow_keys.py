"""Every key type a column can hold keys the cache as the application's str() of it does
(docs/cdc.md); a value that keys nothing clears its namespace; a value that does not
decode is never a crash or a reconnect loop."""

from __future__ import annotations

import uuid
from typing import Any

import redis

import seawall
from cdc.databases import PostgresDatabase
from cdc.helpers import in_redis, wait_until
from cdc.mariadb_database import MariaDBDatabase

UUID = uuid.UUID("0b7e1c2a-3d4f-4a5b-8c6d-7e8f9a0b1c2d")  # version 4
TIMED = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")  # version 1 (stored reordered)


def test_mariadb_keys_of_every_type(
    seawall_mariadb: Any, seawall_url: str, run_follower: Any, caplog: Any
) -> None:
    database = MariaDBDatabase.fresh(seawall_mariadb)
    try:
        for sql in (
            "CREATE TABLE prices (code DECIMAL(10,2) PRIMARY KEY, note VARCHAR(20))",
            "CREATE TABLE days (day DATE PRIMARY KEY, note VARCHAR(20))",
            "CREATE TABLE ids (id UUID PRIMARY KEY, note VARCHAR(20))",
            "CREATE TABLE blobs (id BINARY(16) PRIMARY KEY, note VARCHAR(20))",
            "CREATE TABLE legacy (id INT PRIMARY KEY, note VARCHAR(20) CHARACTER SET latin1)",
            "INSERT INTO prices VALUES (12.50, 'a')",
            "INSERT INTO days VALUES ('2024-01-02', 'a')",
            f"INSERT INTO ids VALUES ('{UUID}', 'a'), ('{TIMED}', 'b')",
            "INSERT INTO blobs VALUES (UNHEX('ff00ee11dd22cc33bb44aa5599668877'), 'a')",
            "INSERT INTO legacy VALUES (1, 'a')",
        ):
            database.execute(sql)
        client = redis.Redis.from_url(seawall_url)
        maps = ["prices=prices", "days=days", "ids=ids", "blobs=blobs", "legacy=legacy"]
        follower = run_follower(database.url, client, maps)
        wait_until(lambda: follower.status().streaming, 15, "the follower streams")
        cached = [("prices", "12.50"), ("days", "2024-01-02"), ("legacy", 1)]
        cached += [("ids", str(UUID)), ("ids", str(TIMED))]
        for namespace, key in cached:
            seawall.Cache(client, namespace).set(key, "old")
        blobs = seawall.Cache(redis.Redis.from_url(seawall_url), "blobs")
        blobs.set("anything", "old")
        # A latin1 byte Python's cp1252 refuses (MariaDB keeps it as U+0081).
        database.execute("UPDATE legacy SET note = CONCAT('x', _latin1 X'81') WHERE id = 1")
        for table in ("prices", "days", "ids", "blobs"):
            database.execute(f"UPDATE {table} SET note = 'new'")
        wait_until(
            lambda: not any(in_redis(client, ns, key) for ns, key in cached),
            10,
            "every typed key is invalidated",
        )
        wait_until(lambda: blobs.get("anything") is None, 10, "the unkeyable one clears")
        assert "no cache key is made of (bytes that are not UTF-8" in caplog.text
        assert "reconnecting" not in caplog.text
        assert follower.status().streaming
        client.close()
    finally:
        database.drop()


def test_a_postgresql_database_not_in_utf8_is_followed(
    seawall_postgres: Any, seawall_url: str, run_follower: Any
) -> None:
    name = f"latin_{uuid.uuid4().hex[:8]}"
    PostgresDatabase(seawall_postgres, "postgres").execute(
        f"CREATE DATABASE {name} ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"
    )
    database = PostgresDatabase(seawall_postgres, name)
    follower = None
    try:
        database.execute("CREATE TABLE users (id INT PRIMARY KEY, name TEXT)")
        database.execute("INSERT INTO users VALUES (1, 'Zoë'), (2, 'Zoë')")
        database.execute("ALTER TABLE users REPLICA IDENTITY FULL")
        client = redis.Redis.from_url(seawall_url)
        follower = run_follower(database.url, client, ["users=users", "users=by_name:name"])
        wait_until(lambda: follower.status().streaming, 15, "the follower streams")
        seawall.Cache(client, "users").set(1, "Zoë")
        seawall.Cache(client, "by_name").set("Zoé", [2])
        database.execute("UPDATE users SET name = 'Zoé' WHERE id = 1")
        wait_until(
            lambda: not in_redis(client, "users", 1) and not in_redis(client, "by_name", "Zoé"),
            10,
            "a non-ASCII value of a LATIN1 database, keyed and not",
        )
        client.close()
    finally:
        if follower is not None:
            follower.stop()  # its stream holds the slot, which holds the database
        database.drop()
