"""A log that no longer goes back to the checkpoint (a replication slot dropped while the
follower was away, a server restored to an earlier point, a purged binlog) is never
streamed in silence: the mapped namespaces are cleared and the follower says why, or
it stops (--on-gap stop)."""

from __future__ import annotations

from typing import Any

import redis

import seawall
from cdc.databases import PostgresDatabase
from cdc.helpers import checkpoint_name, in_redis, wait_until
from seawall.cdc._invalidate import write_checkpoint
from seawall.cli import main


def _ahead(database: Any) -> str:
    """A checkpoint past the end of the server's log, as a restore would leave it."""
    if database.kind == "postgresql":
        return "FF/0"
    (server_id,) = database.execute("SELECT @@server_id")[0]
    return f"gtid:0-{server_id}-99999999"


def test_a_checkpoint_the_log_cannot_serve_clears_the_namespaces(
    database: Any, seawall_url: str, run_follower: Any, caplog: Any
) -> None:
    database.execute("INSERT INTO users VALUES (1, 'a@x', 'Ann'), (2, 'b@x', 'Bob')")
    client = redis.Redis.from_url(seawall_url)
    users = seawall.Cache(redis.Redis.from_url(seawall_url), "users")
    users.set(1, "stale: changed while the log was away")
    name = checkpoint_name(database.url)
    assert write_checkpoint(client, name, _ahead(database), 1)
    follower = run_follower(database.url, client, ["users=users"])
    wait_until(lambda: follower.status().streaming, 15, "the follower streams")
    assert users.get(1) is None, "the namespace was not cleared"
    assert "never seen" in caplog.text and "(users) are cleared" in caplog.text
    # Followed from the server's position now, not skipped past it.
    users.set(2, "Bob")
    database.execute("UPDATE users SET name = 'Bobby' WHERE id = 2")
    wait_until(lambda: not in_redis(client, "users", 2), 10, "later changes are followed")
    client.close()


def test_a_slot_dropped_while_the_follower_was_away_clears_the_namespaces(
    pg_database: PostgresDatabase, seawall_url: str, run_follower: Any
) -> None:
    database = pg_database
    database.execute("INSERT INTO users VALUES (1, 'a@x', 'Ann')")
    client = redis.Redis.from_url(seawall_url)
    follower = run_follower(database.url, client, ["users=users"])
    wait_until(lambda: follower.status().streaming, 15, "the follower streams")
    database.execute("INSERT INTO users VALUES (2, 'b@x', 'Bob')")
    wait_until(lambda: follower.status().row_changes == 1, 10, "a change is checkpointed")
    follower.stop()
    wait_until(lambda: not database.execute(
        "SELECT 1 FROM pg_replication_slots WHERE slot_name = %s AND active", database.slot
    ), 10, "the follower's stream ends")  # fmt: skip
    # A failover to a physical standby (before PostgreSQL 17) loses the slot like this.
    database.execute("SELECT pg_drop_replication_slot(%s)", database.slot)
    database.execute("UPDATE users SET name = 'Anna' WHERE id = 1")  # never in any slot
    users = seawall.Cache(redis.Redis.from_url(seawall_url), "users")
    users.set(1, "Ann")
    again = run_follower(database.url, client, ["users=users"])
    wait_until(lambda: again.status().streaming, 15, "the follower streams again")
    assert users.get(1) is None, "the namespace was not cleared"
    client.close()


def test_on_gap_stop_is_one_line(
    capsys: Any, pg_database: PostgresDatabase, seawall_url: str
) -> None:
    client = redis.Redis.from_url(seawall_url)
    assert write_checkpoint(client, checkpoint_name(pg_database.url), "FF/0", 1)
    code = main(["follow", pg_database.url, "--redis", seawall_url, "--map", "users=users",
                 "--on-gap", "stop"])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 1 and len(err.splitlines()) == 1, err
    assert "is ahead of the WAL" in err and "stopped (on_gap 'stop')" in err
    client.close()


def test_a_restart_after_idle_and_filtered_traffic_is_no_gap(
    pg_database: PostgresDatabase, seawall_url: str, run_follower: Any, caplog: Any
) -> None:
    """The slot is confirmed only up to the checkpoint, idle positions included, so a
    slot ahead of the checkpoint always means a gap and a restart never clears."""
    database = pg_database
    database.execute("CREATE TABLE other (id INT PRIMARY KEY)")
    client = redis.Redis.from_url(seawall_url)
    url = database.url + "&stream_timeout=2"  # keepalives asked for often: quick positions
    follower = run_follower(url, client, ["users=users"])
    wait_until(lambda: follower.status().streaming, 15, "the follower streams")
    database.execute("INSERT INTO users VALUES (1, 'a@x', 'Ann')")
    for i in range(5):  # WAL the publication filters out: confirmed while idle
        database.execute("INSERT INTO other VALUES (%s)", i)
    written = int(database.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn")[0][0])
    wait_until(lambda: database.confirmed_flush() >= written, 15, "the idle slot moves")
    follower.stop()
    wait_until(lambda: not follower.status().leader, 10, "stopped")
    users = seawall.Cache(client, "users")
    users.set(2, "cached")
    again = run_follower(url, client, ["users=users"])
    wait_until(lambda: again.status().streaming, 15, "the follower streams again")
    assert "never seen" not in caplog.text
    assert users.get(2) == "cached"
    client.close()
