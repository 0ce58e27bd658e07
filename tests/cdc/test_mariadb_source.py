"""The MariaDB row-binlog source on a real private MariaDB: events, positions, errors."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator

import pytest

from cdc.mariadb_database import MariaDBDatabase
from seawall.cdc._events import Event, RowChange, SourceError, TxEnd
from seawall.cdc.mariadb import MariaDBSource, source_from_url
from seawall.launcher._mariadb import MariaDBProcess
from seawall.launcher._ports import pick_free_port, release_port

TABLE = "CREATE TABLE users (id INT PRIMARY KEY, name VARCHAR(40), score BIGINT)"


@pytest.fixture
def db(seawall_mariadb: MariaDBProcess) -> Iterator[MariaDBDatabase]:
    database = MariaDBDatabase.fresh(seawall_mariadb)
    database.execute(TABLE)
    yield database
    database.drop()


@pytest.fixture
def open_source(db: MariaDBDatabase) -> Iterator[Callable[..., MariaDBSource]]:
    opened: list[MariaDBSource] = []

    def make(resume_after: str | None = None, url: str | None = None) -> MariaDBSource:
        source = source_from_url(url or db.url)
        opened.append(source)
        source.open(resume_after)
        return source

    yield make
    for source in opened:
        source.close()


def read_until(source: MariaDBSource, tx_ends: int, within: float = 10.0) -> list[Event]:
    """Events until `tx_ends` TxEnds have arrived; fails after `within` seconds."""
    events: list[Event] = []
    deadline = time.monotonic() + within
    while sum(isinstance(e, TxEnd) for e in events) < tx_ends:
        assert time.monotonic() < deadline, f"only {events} within {within}s"
        events.extend(source.read(0.5))
    return events


def changes(events: list[Event]) -> list[tuple[str, dict[str, object], object]]:
    return [(e.op, dict(e.row), e.old) for e in events if isinstance(e, RowChange)]


# -- events ----------------------------------------------------------------------------------


def test_insert_update_delete_arrive_in_order_each_with_its_commit(
    db: MariaDBDatabase, open_source: Callable[..., MariaDBSource]
) -> None:
    source = open_source()
    db.execute("INSERT INTO users VALUES (42, 'ann', 7)")
    db.execute("UPDATE users SET name = 'bea' WHERE id = 42")
    db.execute("DELETE FROM users WHERE id = 42")
    events = read_until(source, 3)
    kinds = [type(e).__name__ for e in events]
    assert kinds == ["RowChange", "TxEnd"] * 3
    table = f"{db.name}.users"
    assert {e.table for e in events if isinstance(e, RowChange)} == {table}
    ann = {"id": 42, "name": "ann", "score": 7}
    bea = {"id": 42, "name": "bea", "score": 7}
    assert changes(events) == [("insert", ann, None), ("update", bea, ann), ("delete", bea, None)]
    first = events[0]
    assert isinstance(first, RowChange) and type(first.row["id"]) is int
    ends = [e for e in events if isinstance(e, TxEnd)]
    assert len({e.position for e in ends}) == 3
    assert all(e.committed_at is not None and abs(e.committed_at - time.time()) < 60 for e in ends)


def test_a_transaction_gives_its_changes_then_one_txend_and_a_rollback_gives_nothing(
    db: MariaDBDatabase, open_source: Callable[..., MariaDBSource]
) -> None:
    source = open_source()
    db.execute("BEGIN")
    db.execute("INSERT INTO users VALUES (1, 'a', 1), (2, 'b', 2)")
    db.execute("UPDATE users SET score = 3 WHERE id = 1")
    db.execute("COMMIT")
    db.execute("BEGIN")
    db.execute("INSERT INTO users VALUES (3, 'rolled back', 0)")
    db.execute("ROLLBACK")
    db.execute("DELETE FROM users WHERE id = 2")
    events = read_until(source, 2)
    assert [type(e).__name__ for e in events] == [
        "RowChange", "RowChange", "RowChange", "TxEnd", "RowChange", "TxEnd"
    ]  # fmt: skip
    assert [(op, row["id"]) for op, row, _ in changes(events)] == [
        ("insert", 1), ("insert", 2), ("update", 1), ("delete", 2)
    ]  # fmt: skip
    assert source.read(0.3) == []


def test_resume_after_a_txend_gives_exactly_the_later_transactions(
    db: MariaDBDatabase, open_source: Callable[..., MariaDBSource]
) -> None:
    source = open_source()
    for n in range(1, 4):
        db.execute("INSERT INTO users VALUES (%s, 'x', 0)", n)
    ends = [e for e in read_until(source, 3) if isinstance(e, TxEnd)]
    assert ends[1].position.startswith("gtid:")
    source.close()
    db.execute("INSERT INTO users VALUES (4, 'while away', 0)")
    again = open_source(ends[1].position)
    events = read_until(again, 2)
    assert [row["id"] for _, row, _ in changes(events)] == [3, 4]
    assert next(e.position for e in events if isinstance(e, TxEnd)) == ends[2].position


def test_resume_from_a_file_position_on_mariadb(
    db: MariaDBDatabase, open_source: Callable[..., MariaDBSource]
) -> None:
    """The MySQL path (file:NAME:OFFSET) exercised on MariaDB."""
    name, offset = db.execute("SHOW MASTER STATUS")[0][:2]
    db.execute("INSERT INTO users VALUES (1, 'x', 0)")
    db.execute("FLUSH BINARY LOGS")  # the stream rotates to the next file in between
    db.execute("INSERT INTO users VALUES (2, 'y', 0)")
    db.execute("INSERT INTO users VALUES (3, 'z', 0)")
    source = open_source(f"file:{name}:{offset}")
    events = read_until(source, 3)
    assert [row["id"] for _, row, _ in changes(events)] == [1, 2, 3]
    ends = [e.position for e in events if isinstance(e, TxEnd)]
    assert ends[0].startswith(f"file:{name}:")
    assert not ends[1].startswith(f"file:{name}:")
    source.close()
    again = open_source(ends[1])
    assert [row["id"] for _, row, _ in changes(read_until(again, 1))] == [3]


def test_other_databases_ddl_and_non_transactional_tables_still_end_transactions(
    db: MariaDBDatabase, open_source: Callable[..., MariaDBSource]
) -> None:
    other = MariaDBDatabase.fresh(db.server)
    try:
        other.execute(TABLE)
        source = open_source()
        other.execute("INSERT INTO users VALUES (1, 'elsewhere', 0)")
        db.execute("CREATE TABLE notes (id INT PRIMARY KEY) ENGINE=Aria TRANSACTIONAL=0")
        db.execute("INSERT INTO notes VALUES (9)")
        events = read_until(source, 3)
        assert changes(events) == [("insert", {"id": 9}, None)]
        assert [type(e).__name__ for e in events] == ["TxEnd", "TxEnd", "RowChange", "TxEnd"]
    finally:
        other.drop()


def test_watch_decodes_only_the_mapped_tables_and_checks_their_columns(
    db: MariaDBDatabase,
) -> None:
    db.execute("CREATE TABLE logs (id INT PRIMARY KEY, line VARCHAR(40))")
    source = source_from_url(db.url)
    try:
        with pytest.raises(SourceError, match=r"no column 'nope'.*--map"):
            source.watch({f"{db.name}.users": "nope"})
        source.watch({f"{db.name}.users": "name"})
        source.open(None)
        db.execute("INSERT INTO logs VALUES (1, 'unmapped')")
        db.execute("INSERT INTO users VALUES (1, 'ann', 0)")
        events = read_until(source, 2)
        # The unmapped table's transaction still ends, so the position moves on.
        assert [type(e).__name__ for e in events] == ["TxEnd", "RowChange", "TxEnd"]
        assert changes(events) == [("insert", {"id": 1, "name": "ann", "score": 0}, None)]
    finally:
        source.close()


def test_read_returns_empty_after_its_timeout(
    db: MariaDBDatabase, open_source: Callable[..., MariaDBSource]
) -> None:
    source = open_source()
    started = time.monotonic()
    assert source.read(0.4) == []
    elapsed = time.monotonic() - started
    # A liveness check (read must not block on a quiet log), not a latency bound.
    assert 0.35 <= elapsed < 10.0


# -- server restart and lost log ----------------------------------------------------------


def test_a_server_restart_raises_and_a_reopen_resumes_at_the_checkpoint(
    db: MariaDBDatabase, open_source: Callable[..., MariaDBSource]
) -> None:
    source = open_source()
    db.execute("INSERT INTO users VALUES (1, 'before', 0)")
    checkpoint = [e for e in read_until(source, 1) if isinstance(e, TxEnd)][-1].position
    db.kill()
    started = time.monotonic()
    with pytest.raises(SourceError, match=r"^lost the binlog stream from MariaDB at 127\.0\.0\.1"):
        while time.monotonic() - started < 10:
            source.read(0.5)
    assert time.monotonic() - started < 10
    db.restart()
    db.execute("INSERT INTO users VALUES (2, 'after', 0)")
    again = open_source(checkpoint)
    assert [row["id"] for _, row, _ in changes(read_until(again, 1))] == [2]


def test_a_second_stream_with_the_same_server_id_ends_the_first_with_the_fix(
    db: MariaDBDatabase, open_source: Callable[..., MariaDBSource]
) -> None:
    server_id = random.randint(1000, 2**31 - 1)  # the server's other tests pick 2^31+
    url = f"{db.url}?server_id={server_id}"
    first = open_source(url=url)
    second = open_source(url=url)
    db.execute("INSERT INTO users VALUES (1, 'ann', 0)")
    assert changes(read_until(second, 1)) == [
        ("insert", {"id": 1, "name": "ann", "score": 0}, None)
    ]
    deadline = time.monotonic() + 10
    with pytest.raises(SourceError, match=rf"same server_id \({server_id}\).*\?server_id=N"):
        while time.monotonic() < deadline:
            first.read(0.5)


def test_a_purged_checkpoint_is_a_clear_gap_error(
    db: MariaDBDatabase, open_source: Callable[..., MariaDBSource]
) -> None:
    source = open_source()
    db.execute("INSERT INTO users VALUES (1, 'x', 0)")
    old = [e for e in read_until(source, 1) if isinstance(e, TxEnd)][-1].position
    source.close()
    db.execute("FLUSH BINARY LOGS")
    db.execute("INSERT INTO users VALUES (2, 'lost', 0)")
    db.execute("FLUSH BINARY LOGS")
    current = db.execute("SHOW MASTER STATUS")[0][0]
    # A binlog stays until InnoDB has flushed its commits (about a second here).
    deadline = time.monotonic() + 10
    while len(db.execute("SHOW BINARY LOGS")) > 1:
        assert time.monotonic() < deadline, "PURGE BINARY LOGS left the old logs"
        db.execute(f"PURGE BINARY LOGS TO '{current}'")
        time.sleep(0.1)
    with pytest.raises(SourceError) as caught:
        open_source(old)
    message = str(caught.value)
    assert "\n" not in message
    assert f"no longer has the binlog after {old}" in message
    assert "clear the mapped cache namespaces" in message


# -- errors ----------------------------------------------------------------------------------


def test_key_columns_and_missing_tables(db: MariaDBDatabase) -> None:
    db.execute("CREATE TABLE pairs (a INT, b INT, note TEXT, PRIMARY KEY (b, a))")
    db.execute("CREATE TABLE loose (a INT)")
    source = MariaDBSource(db.url)
    try:
        assert list(source.key_columns("users")) == ["id"]
        assert list(source.key_columns(f"{db.name}.pairs")) == ["b", "a"]
        with pytest.raises(SourceError, match=rf"^table {db.name}\.nope does not exist"):
            source.key_columns("nope")
        assert list(source.key_columns("loose")) == []  # a map names its column
        with pytest.raises(SourceError, match=r"has no primary key; .*--map loose=NAMESPACE:"):
            source.watch({"loose": None})
        source.watch({"loose": "a"})
        with pytest.raises(SourceError, match=rf"^table other\.users is not in database {db.name}"):
            source.key_columns("other.users")
    finally:
        source.close()


def test_an_unreachable_server_is_one_line() -> None:
    port = pick_free_port()
    try:
        source = MariaDBSource(f"mysql://root@127.0.0.1:{port}/app", connect_timeout=2)
        with pytest.raises(SourceError, match=rf"^cannot reach MariaDB at 127\.0\.0\.1:{port}: "):
            source.open(None)
    finally:
        release_port(port)


def test_a_wrong_password_and_a_missing_database_are_one_line(db: MariaDBDatabase) -> None:
    port = db.server.port
    with pytest.raises(SourceError, match=r"refused user 'root': .*check the user and password"):
        MariaDBSource(f"mysql://root:wrong@127.0.0.1:{port}/{db.name}").open(None)
    with pytest.raises(SourceError, match=r"^database 'nope' does not exist on MariaDB at"):
        MariaDBSource(f"mysql://root@127.0.0.1:{port}/nope").open(None)


def test_users_without_replication_privileges_are_told_what_to_grant(
    db: MariaDBDatabase,
) -> None:
    host = "127.0.0.1"
    db.admin(f"CREATE USER 'r_{db.name}'@'{host}'")
    db.admin(f"CREATE USER 'm_{db.name}'@'{host}'")
    try:
        db.admin(f"GRANT SELECT ON `{db.name}`.* TO 'r_{db.name}'@'{host}'")
        db.admin(f"GRANT SELECT, BINLOG MONITOR ON *.* TO 'm_{db.name}'@'{host}'")
        reader = MariaDBSource(db.server.url(db.name, user=f"r_{db.name}"))
        with pytest.raises(SourceError, match=r"GRANT REPLICATION CLIENT ON \*\.\*"):
            reader.open(None)
        monitor = MariaDBSource(db.server.url(db.name, user=f"m_{db.name}"))
        with pytest.raises(SourceError, match=r"GRANT REPLICATION SLAVE ON \*\.\*"):
            monitor.open(None)
    finally:
        db.admin(f"DROP USER 'r_{db.name}'@'{host}', 'm_{db.name}'@'{host}'")


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("binlog_format = 'STATEMENT'", r"^binlog_format is STATEMENT on MariaDB at .*; set "
         r"binlog_format=ROW \(and binlog_row_image=FULL\) in my\.cnf \[mysqld\]"),
        ("binlog_format = 'MIXED'", r"^binlog_format is MIXED on"),
        ("binlog_row_image = 'MINIMAL'", r"^binlog_row_image is MINIMAL on .*=FULL"),
        ("binlog_row_metadata = 'NO_LOG'", r"^binlog_row_metadata is NO_LOG on .*=FULL"),
        ("log_bin_compress = ON", r"^log_bin_compress is ON on .*=OFF"),
    ],
)  # fmt: skip
def test_each_bad_binlog_setting_is_one_line_with_its_fix(
    db: MariaDBDatabase, setting: str, message: str
) -> None:
    """On the worker's own server (tests of a worker run one at a time), put back after."""
    try:
        db.admin(f"SET GLOBAL {setting}")
        source = MariaDBSource(db.url)
        with pytest.raises(SourceError, match=message) as caught:
            source.open(None)
        source.close()
        assert "\n" not in str(caught.value)
    finally:
        db.admin(
            "SET GLOBAL binlog_format = 'ROW', binlog_row_image = 'FULL', "
            "binlog_row_metadata = 'FULL', log_bin_compress = OFF"
        )


def test_binary_logging_off_is_one_line_with_its_fix(db: MariaDBDatabase) -> None:
    server = db.server
    try:
        server.log_bin = False
        db.restart()
        source = MariaDBSource(db.url)
        with pytest.raises(SourceError, match=r"^binary logging is off on MariaDB at .*log_bin"):
            source.open(None)
        source.close()
    finally:
        server.log_bin = True
        db.restart()


def test_heartbeats_keep_an_idle_stream_past_its_read_timeout(
    db: MariaDBDatabase, open_source: Callable[..., MariaDBSource]
) -> None:
    """heartbeat=0.25 gives a 1 s socket read timeout: without the server's heartbeats,
    1.5 s of silence would end the stream."""
    source = open_source(url=db.url + "?heartbeat=0.25")
    idle_until = time.monotonic() + 1.5
    while time.monotonic() < idle_until:
        assert source.read(0.5) == []
    db.execute("INSERT INTO users VALUES (5, 'still here', 0)")
    assert [row["id"] for _, row, _ in changes(read_until(source, 1))] == [5]
