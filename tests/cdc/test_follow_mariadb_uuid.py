"""A MariaDB UUID key whose stored bytes end in zeros (the chaos test found this: about
one version-4 UUID in 256 ends in 00). The binlog strips a fixed-length binary value's
trailing zero bytes, so the follower got 15 bytes or fewer, could not key them and
cleared the whole namespace instead of invalidating the row."""

from __future__ import annotations

from typing import Any

import redis

import seawall
from cdc.helpers import in_redis, wait_until
from cdc.mariadb_database import MariaDBDatabase

ENDS_IN_ZEROS = (
    "0b7e1c2a-3d4f-4a5b-8c6d-7e8f9a0b1c00",
    "0b7e1c2a-3d4f-4a5b-8c6d-7e8f9a000000",
)


def test_a_uuid_ending_in_zero_bytes_is_keyed(
    seawall_mariadb: Any, seawall_url: str, run_follower: Any, caplog: Any
) -> None:
    database = MariaDBDatabase.fresh(seawall_mariadb)
    try:
        database.execute("CREATE TABLE ids (id UUID PRIMARY KEY, note VARCHAR(20))")
        for key in ENDS_IN_ZEROS:
            database.execute("INSERT INTO ids VALUES (%s, 'a')", key)
        client = redis.Redis.from_url(seawall_url)
        follower = run_follower(database.url, client, ["ids=ids"])
        wait_until(lambda: follower.status().streaming, 15, "the follower streams")
        ids = seawall.Cache(client, "ids")
        for key in ENDS_IN_ZEROS:
            ids.set(key, "old")
        ids.set("a bystander", "kept")
        database.execute("UPDATE ids SET note = 'new'")
        wait_until(
            lambda: not any(in_redis(client, "ids", key) for key in ENDS_IN_ZEROS),
            10,
            "each UUID key is invalidated",
        )
        assert "no cache key is made of" not in caplog.text
        assert ids.get("a bystander") == "kept", "the namespace was cleared"
        client.close()
    finally:
        database.drop()
