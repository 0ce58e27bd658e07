"""A MariaDB source is elected by the server's identity, not the URL's spelling, and its
checkpoint is also kept under the address, where the server behind it after a failover
(a new identity) finds it."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
import redis

import seawall
from cdc.conftest import USERS
from cdc.helpers import checkpoint_name, in_redis, wait_until
from cdc.mariadb_database import MariaDBDatabase
from seawall.cdc._invalidate import checkpoint_key, read_checkpoint, write_checkpoint
from seawall.cdc.mariadb import MariaDBSource

# One replica id for every follower, as a deployment that names one does: two streams of
# one id end each other (the server drops the older), so two leaders would take turns.
SERVER_ID = 4242


@pytest.fixture
def mariadb(seawall_mariadb: Any) -> Iterator[MariaDBDatabase]:
    database = MariaDBDatabase.fresh(seawall_mariadb)
    database.execute(USERS)
    yield database
    database.drop()


def test_two_spellings_of_one_server_elect_one_follower(
    mariadb: MariaDBDatabase, seawall_url: str, run_follower: Any, caplog: Any
) -> None:
    """127.0.0.1 and localhost name one server: one election (by its server_uid), so the
    second stands by instead of streaming beside the first (with one server_id the two
    streams ended each other every second), and it resumes from the same checkpoint."""
    client = redis.Redis.from_url(seawall_url)
    users = seawall.Cache(client, "users")
    url = f"{mariadb.url}?server_id={SERVER_ID}"
    first = run_follower(url, client, ["users=users"], ttl=1.0)
    wait_until(lambda: first.status().streaming, 15, "the first streams")
    caplog.set_level(logging.INFO, "seawall.cdc")
    second = run_follower(url.replace("127.0.0.1", "localhost"), client, ["users=users"], ttl=1.0)
    # The second used to lead at once (an election of its own): it must try this one and
    # find it held (its try waits up to the 1 s ttl) rather than lead.
    wait_until(
        lambda: "another follower leads" in caplog.text or second.status().leader,
        15,
        "the second tries the first's election",
    )
    assert first.status().streaming and not second.status().leader
    assert "dropped this binlog stream" not in caplog.text
    users.set(1, "Ann")
    mariadb.execute("INSERT INTO users VALUES (1, 'a@x', 'Ann')")
    wait_until(lambda: not in_redis(client, "users", 1), 10, "followed")
    first.stop()
    wait_until(lambda: not first.status().leader, 5, "the first stops")
    users.set(2, "Bob")  # changed while no follower streams: owed to the successor
    mariadb.execute("INSERT INTO users VALUES (2, 'b@x', 'Bob')")
    wait_until(lambda: second.status().streaming, 20, "the other spelling takes over")
    wait_until(lambda: not in_redis(client, "users", 2), 10, "followed from the checkpoint")
    assert "dropped this binlog stream" not in caplog.text
    client.close()


def test_a_new_server_behind_the_address_resumes_from_the_address_checkpoint(
    mariadb: MariaDBDatabase, seawall_url: str, run_follower: Any
) -> None:
    """After a failover the server behind the address has a new identity, so a new
    election with no checkpoint of its own: it resumes from the GTID position kept under
    the address (valid on every server of the topology), never from "now"."""
    client = redis.Redis.from_url(seawall_url)
    users = seawall.Cache(client, "users")
    first = run_follower(mariadb.url, client, ["users=users"], ttl=1.0)
    wait_until(lambda: first.status().streaming, 15, "the first streams")
    address = MariaDBSource(mariadb.url).name
    identity = checkpoint_name(mariadb.url)
    assert identity != address and identity.startswith("mariadb:")
    mariadb.execute("INSERT INTO users VALUES (1, 'a@x', 'Ann')")
    wait_until(lambda: (read_checkpoint(client, address)[0] or "").startswith("gtid:"), 5, "copy")
    first.stop()
    wait_until(lambda: not first.status().leader, 5, "the first stops")
    # The copy follows within a second (a copy behind only replays more).
    assert read_checkpoint(client, address)[0]
    users.set(2, "Bob")
    mariadb.execute("INSERT INTO users VALUES (2, 'b@x', 'Bob')")
    # The new server's identity has no checkpoint (nor an election) yet.
    client.delete(checkpoint_key(identity))
    client.hset(checkpoint_key(address), "server", "mariadb:the-old-primary/x")
    second = run_follower(mariadb.url, client, ["users=users"], ttl=1.0)
    wait_until(lambda: second.status().streaming, 15, "the second streams")
    wait_until(lambda: not in_redis(client, "users", 2), 10, "followed from the copy")
    assert users.get(2) is None
    client.close()


def test_a_file_position_of_another_server_is_a_gap(
    mariadb: MariaDBDatabase, seawall_url: str, run_follower: Any, caplog: Any
) -> None:
    """A binlog file offset names one server's files: read under the address after a
    failover, it is not resumed from (it could land anywhere in the new server's log) but
    cleared as a gap."""
    client = redis.Redis.from_url(seawall_url)
    users = seawall.Cache(client, "users")
    users.set(1, "stale: changed on the old server after its last checkpoint")
    address = MariaDBSource(mariadb.url).name
    position = f"file:{mariadb.execute('SHOW MASTER STATUS')[0][0]}:4"
    assert write_checkpoint(client, address, position, 1, server="mariadb:the-old-primary/x")
    follower = run_follower(mariadb.url, client, ["users=users"], ttl=1.0)
    wait_until(lambda: follower.status().streaming, 15, "the follower streams")
    assert users.get(1) is None
    assert "was read from another server" in caplog.text
    client.close()
