"""Bad input to `seawall follow`: one line naming the problem and the fix, a non-zero
exit code, no traceback."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from cdc.databases import PostgresDatabase
from cdc.helpers import FollowerProcess, wait_until
from cdc.mariadb_database import MariaDBDatabase
from seawall.cli import main
from seawall.launcher._mariadb import MariaDBProcess
from seawall.launcher._postgres import PostgresProcess


@pytest.fixture
def replica_level_postgres(seawall_postgres: PostgresProcess) -> Iterator[PostgresProcess]:
    """The session server restarted with wal_level=replica (no test of this worker holds
    a logical slot now: PostgreSQL would refuse to start), then back to logical."""
    logical = seawall_postgres.settings
    seawall_postgres.settings = (*logical, "wal_level=replica")
    seawall_postgres.restart()
    try:
        yield seawall_postgres
    finally:
        seawall_postgres.settings = logical
        seawall_postgres.restart()


def _fails(capsys: Any, *args: str) -> str:
    code = main(["follow", *args])
    err = capsys.readouterr().err.strip()
    assert code != 0
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    return err


def test_bad_input_is_one_line_and_a_nonzero_exit(
    capsys: Any, pg_database: PostgresDatabase, seawall_url: str
) -> None:
    database = pg_database  # PostgreSQL's own messages (MariaDB's: test_mariadb_source.py)
    url = database.url
    err = _fails(capsys, url, "--redis", seawall_url, "--map", "users")
    assert "TABLE=NAMESPACE" in err
    err = _fails(capsys, url, "--redis", seawall_url, "--map", "a=x", "--map", "public.a=x")
    assert "mapped to namespace 'x' twice" in err
    err = _fails(capsys, url, "--redis", seawall_url, "--map", "nosuch=users")
    assert "table public.nosuch does not exist" in err
    err = _fails(capsys, url, "--redis", seawall_url, "--map", "users=by_name:name")
    assert "REPLICA IDENTITY FULL" in err
    err = _fails(capsys, url, "--redis", seawall_url, "--map", "users=u:nope")
    assert "no column 'nope'" in err
    err = _fails(capsys, "redis://x/0", "--redis", seawall_url, "--map", "users=users")
    assert "postgresql://" in err and "mysql://" in err
    err = _fails(capsys, url, "--redis", "redis://127.0.0.1:1/0", "--map", "users=users")
    assert "cannot reach Redis" in err

    database.execute("CREATE ROLE plain LOGIN")
    try:
        plain = url.replace("postgres@", "plain@")
        err = _fails(capsys, plain, "--redis", seawall_url, "--map", "users=users")
        assert "ALTER ROLE" in err and "REPLICATION" in err
    finally:
        database.execute("DROP ROLE plain")

    port = database.server.port
    gone = url.replace(f":{port}/", ":1/")
    err = _fails(capsys, gone, "--redis", seawall_url, "--map", "users=users")
    assert "cannot connect" in err


def test_a_server_without_logical_decoding_is_refused(
    capsys: Any, replica_level_postgres: PostgresProcess, seawall_url: str
) -> None:
    PostgresDatabase(replica_level_postgres, "postgres").execute(
        "CREATE TABLE users (id INT PRIMARY KEY)"
    )
    err = _fails(
        capsys, replica_level_postgres.url(), "--redis", seawall_url, "--map", "users=users"
    )
    assert "wal_level is replica; set wal_level=logical in postgresql.conf and restart" in err


def test_help_shows_the_setup(capsys: Any) -> None:
    assert main(["follow", "--help"]) == 0
    out = capsys.readouterr().out
    for needed in ("wal_level = logical", "max_replication_slots", "max_wal_senders",
                   "WITH LOGIN REPLICATION", "GRANT SELECT", "--map",
                   "binlog_format = ROW", "binlog_row_image = FULL",
                   "binlog_row_metadata = FULL", "GRANT REPLICATION SLAVE, BINLOG MONITOR",
                   "mysql://seawall:secret@db:3306/shop", "seawall[cdc-mysql]"):  # fmt: skip
        assert needed in out


def test_bad_mariadb_input_is_one_line_and_a_nonzero_exit(
    capsys: Any, seawall_mariadb: MariaDBProcess, seawall_url: str
) -> None:
    database = MariaDBDatabase.fresh(seawall_mariadb)
    try:
        database.execute("CREATE TABLE users (id INT PRIMARY KEY, name VARCHAR(40))")
        url = database.url
        err = _fails(capsys, url, "--redis", seawall_url, "--map", "nosuch=users")
        assert f"table {database.name}.nosuch does not exist" in err
        err = _fails(capsys, url, "--redis", seawall_url, "--map", "users=u:nope")
        assert "no column 'nope'" in err
        err = _fails(capsys, url, "--redis", seawall_url, "--map", "other.users=users")
        assert f"not in database {database.name}" in err
        err = _fails(capsys, f"{url}?server=1", "--redis", seawall_url, "--map", "users=users")
        assert "unknown option 'server'" in err and "server_id" in err
        err = _fails(capsys, "mysql://root@127.0.0.1", "--redis", seawall_url, "--map", "u=u")
        assert "mysql://USER[:PASSWORD]@HOST[:PORT]/DATABASE" in err
        gone = url.replace(f":{seawall_mariadb.port}/", ":1/")
        err = _fails(capsys, gone, "--redis", seawall_url, "--map", "users=users")
        assert "cannot reach MariaDB at 127.0.0.1:1" in err
    finally:
        database.drop()


def test_json_status_lines_on_stdout(database: Any, seawall_url: str, tmp_path: Any) -> None:
    follower = FollowerProcess(
        tmp_path, database.url, seawall_url, "--map", "users=users", "--json",
        "--status-interval", "0.2",
    )  # fmt: skip
    try:
        follower.wait_streaming()
        database.execute("INSERT INTO users VALUES (1, 'a@x', 'Ann')")

        def statuses() -> list[dict[str, Any]]:
            lines = follower.log().splitlines()
            return [json.loads(line) for line in lines if line.startswith("{")]

        wait_until(
            lambda: any(s["row_changes"] >= 1 for s in statuses()),
            15,
            f"a status line counts the insert:\n{follower.log()}",
        )
        last = statuses()[-1]
        assert last["leader"] and last["streaming"] and last["invalidated"] >= 0
        prefix = "gtid:" if database.kind == "mariadb" else ""
        assert last["position"] and last["position"].startswith(prefix)
        assert last["source"].startswith("mariadb:" if prefix else "postgresql")
    finally:
        follower.stop()


def test_settings_that_would_lose_keys_are_refused_in_one_line(
    capsys: Any, pg_database: PostgresDatabase, seawall_url: str
) -> None:
    database = pg_database
    url, args = database.url, ("--redis", seawall_url)
    database.execute("ALTER TABLE users ADD COLUMN handle TEXT GENERATED ALWAYS AS (email) STORED")
    err = _fails(capsys, url, *args, "--map", "users=u:handle")
    assert "'handle' of public.users is generated" in err
    database.execute("ALTER TABLE users ALTER COLUMN email SET NOT NULL")
    database.execute("ALTER TABLE users REPLICA IDENTITY USING INDEX users_email_key")
    err = _fails(capsys, url, *args, "--map", "users=users")
    assert "REPLICA IDENTITY USING INDEX on an index without 'id'" in err
    assert "REPLICA IDENTITY FULL" in err
    database.execute("ALTER TABLE users REPLICA IDENTITY NOTHING")
    err = _fails(capsys, url, *args, "--map", "users=users")
    assert "REPLICA IDENTITY NOTHING" in err
    database.execute("ALTER TABLE users REPLICA IDENTITY DEFAULT")
    database.execute(
        f"CREATE PUBLICATION {database.name}_pub FOR TABLE users WITH (publish = 'insert')"
    )
    err = _fails(capsys, url, *args, "--map", "users=users")
    assert "does not publish every insert, update, delete and truncate" in err
    assert "SET (publish = 'insert, update, delete, truncate')" in err


def test_ctrl_c_exits_130(pg_database: PostgresDatabase, seawall_url: str, tmp_path: Any) -> None:
    follower = FollowerProcess(tmp_path, pg_database.url, seawall_url, "--map", "users=users")
    try:
        follower.wait_streaming()
        follower.proc.send_signal(signal.SIGINT)
        assert follower.proc.wait(10) == 130, follower.log()
        assert "Traceback" not in follower.log()
    finally:
        follower.stop()
