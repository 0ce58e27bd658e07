"""The MariaDB/MySQL row binlog as a change-log source for `seawall follow`.

The follower connects as a replica would (COM_BINLOG_DUMP) and decodes row events with
mysql-replication (``pymysqlreplication``, over PyMySQL): the maintained pure-Python
reader of the replication protocol, with MariaDB GTID support (``is_mariadb``,
``auto_position`` as the connect state, ``MariadbGtidEvent``) and column names taken
from the log itself (``binlog_row_metadata=FULL``). Two of its behaviours are handled
here: it silently reconnects after a lost connection from the position it was first
given (this source turns that into an error instead, see `read`), and its blocking read
has no timeout short of killing the connection (a reader thread feeds a queue instead).

Positions: ``gtid:D-S-N[,...]`` on MariaDB (survives rotation, restarts and failover),
``file:NAME:OFFSET`` on MySQL or when resuming from a file position.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Mapping, Sequence
from typing import Any

try:
    import pymysql
    import pymysqlreplication  # noqa: F401 - checked here to name the extra
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        f"following MariaDB/MySQL needs the cdc-mysql extra ({exc.name} is missing): "
        'pip install "seawall[cdc-mysql]"'
    ) from exc

from seawall.cdc._events import Event, LogGap, SourceError, Watched, watched_columns
from seawall.cdc._mariadb_config import (
    SERVER_ID_MAX,
    FilePosition,
    GtidPosition,
    MariaDBURL,
    Position,
    check_settings,
    log_gone,
    no_binlog_monitor,
    no_replication_slave,
    parse_position,
    parse_url,
)
from seawall.cdc._mariadb_reader import BinlogReader, StreamLost

__all__ = ["MariaDBSource", "source_from_url"]

_SETTINGS = (
    "log_bin",
    "binlog_format",
    "binlog_row_image",
    "binlog_row_metadata",
    "binlog_transaction_compression",
    "log_bin_compress",
)
_ER_ACCESS_DENIED = 1045
_ER_BAD_DB = 1049
_ER_PARSE = 1064
_ER_SPECIFIC_ACCESS_DENIED = 1227
_ER_MASTER_FATAL_READING_BINLOG = 1236
_ER_SLAVE_SAME_ID = 4052  # MariaDB: a newer replica connection took this server_id


def source_from_url(url: str) -> MariaDBSource:
    """A source for ``mysql://`` or ``mariadb://`` URLs (same meaning)."""
    return MariaDBSource(url)


class MariaDBSource:
    """Follows one database's row changes on a MariaDB (10.5+) or MySQL (8.0+) server.

    Row events of other databases are skipped undecoded; their transactions still end in
    a TxEnd, so the position advances on a quiet database too.
    """

    def __init__(self, url: str | MariaDBURL, *, connect_timeout: float = 5.0) -> None:
        self.url = parse_url(url) if isinstance(url, str) else url
        self.connect_timeout = connect_timeout
        self.name = f"mariadb:{self.url.host}:{self.url.port}/{self.url.database}"
        # A bare `--map users=...` is a table of the followed database.
        self.default_schema = self.url.database
        self._where = f"MariaDB at {self.url.address}"
        self._control: Any = None
        self._reader: BinlogReader | None = None
        self._tables: list[str] | None = None  # None: every table of the database
        self._uuids: dict[str, frozenset[str]] = {}  # table -> its UUID columns
        self._server_id = 0  # the replica id of the open stream
        #: What followers elect by: the server's own identity, known once watch() has
        #: connected (see _identity). The checkpoint is kept under it too, and copied
        #: under `name`, the address, where the next server behind it finds it.
        self.election_name: str | None = None

    # -- Source ------------------------------------------------------------------------

    def key_columns(self, table: str) -> Sequence[str]:
        database, _, name = table.rpartition(".")
        database = database or self.url.database
        qualified = f"{database}.{name}"
        if database != self.url.database:
            raise SourceError(
                f"table {qualified} is not in database {self.url.database}, the one the "
                f"source URL follows; map tables of {self.url.database}, or run one "
                "follower per database"
            )
        found = self._query(
            "SELECT COUNT(*) FROM information_schema.TABLES "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
            (database, name),
        )
        if not found or not found[0][0]:
            raise SourceError(
                f"table {qualified} does not exist on {self._where} (or user "
                f"{self.url.user!r} may not SELECT it); create it, GRANT SELECT ON "
                f"{database}.* to the user, or fix the --map"
            )
        columns = self._query(
            "SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND CONSTRAINT_NAME = 'PRIMARY' "
            "ORDER BY ORDINAL_POSITION",
            (database, name),
        )
        # None without a primary key: a map then names its column (the FULL row image
        # logs every column, so any column can key).
        return [str(row[0]) for row in columns]

    def watch(self, columns: Mapping[str, Watched]) -> None:
        """The tables to follow, each with the column it is keyed by (None: primary key;
        several when it feeds several namespaces).

        Only their rows are decoded from then on (the next open): the library skips
        other tables' row events unparsed, so a busy unmapped table costs the follower
        little. A named column must exist; the FULL row image logs every column of
        deleted rows and of both versions of updated ones, so any column can key.
        """
        names: list[str] = []
        for table, value in columns.items():
            keys = self.key_columns(table)  # the table exists in the followed database
            name = table.rpartition(".")[2]
            for column in watched_columns(value):
                if column is None and not keys:
                    raise SourceError(
                        f"table {self.url.database}.{name} on {self._where} has no primary "
                        f"key; name the key column in the map: --map {name}=NAMESPACE:COLUMN"
                    )
                if column is None:
                    continue
                found = self._query(
                    "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s "
                    "AND TABLE_NAME = %s AND COLUMN_NAME = %s",
                    (self.url.database, name, column),
                )
                if not found or not found[0][0]:
                    raise SourceError(
                        f"table {self.url.database}.{name} has no column {column!r}: fix "
                        "--map (TABLE=NAMESPACE:COLUMN)"
                    )
            names.append(name)
        self._tables = names or None
        # MariaDB's UUID type is logged as its 16 bytes: given back in its text form, as
        # the application reads it and keys its cache.
        self._uuids = {}
        for name in names:
            found = self._query(
                "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s "
                "AND TABLE_NAME = %s AND DATA_TYPE = 'uuid'",
                (self.url.database, name),
            )
            if found:
                self._uuids[f"{self.url.database}.{name}"] = frozenset(str(r[0]) for r in found)
        self.election_name = self._identity()

    def portable(self, position: str) -> bool:
        """Whether `position` is valid on every server of the replication topology: a
        MariaDB GTID position is (a promoted replica has the same GTIDs), a binlog file
        offset names one server's files."""
        return position.startswith("gtid:")

    def open(self, resume_after: str | None) -> str:
        """Check the server and start reading after `resume_after` (None: from now).

        Returns the position reading starts after: the server keeps no position for a
        replica, so the follower checkpoints it (see Source.open)."""
        self.close()
        start = parse_position(resume_after) if resume_after is not None else None
        version = str(self._query("SELECT VERSION()")[0][0])
        mariadb = "mariadb" in version.lower()
        if not mariadb:
            self._where = f"MySQL at {self.url.address}"
        variables = {
            str(name).lower(): str(value)
            for name, value in self._query(
                "SHOW GLOBAL VARIABLES WHERE Variable_name IN (%s, %s, %s, %s, %s, %s)", _SETTINGS
            )
        }
        problem = check_settings(variables, self._where)
        if problem is not None:
            raise SourceError(problem)
        status = self._binlog_status()
        if start is None:
            start = self._current_position(mariadb, status)
        elif isinstance(start, GtidPosition) and not mariadb:
            raise SourceError(
                f"{resume_after} is a MariaDB GTID position but {self._where} is MySQL; "
                "start the follower without its checkpoint"
            )
        self._reader = self._start_reader(start)
        return str(start)

    def read(self, timeout: float) -> Sequence[Event]:
        """Events in log order, [] after `timeout` seconds with none.

        A lost connection (server restart, network) is not retried here: once the
        events received before it are returned, read raises SourceError, and the caller
        reopens from its last checkpoint (the follower does). Retrying inside would
        replay from wherever the stream happened to be, in the middle of a transaction.
        """
        if self._reader is None:
            raise SourceError(f"the source {self.name} is not open: call open() first")
        try:
            return self._reader.read(timeout)
        except StreamLost as exc:
            self.close()
            if exc.code == _ER_SLAVE_SAME_ID:
                # Harmless after a fail-over (the new leader took the id over); two
                # followers or replicas sharing one id would drop each other forever.
                raise SourceError(
                    f"{self._where} dropped this binlog stream: another replica connected "
                    f"with the same server_id ({self._server_id}); give every follower and "
                    "replica of the server its own ?server_id=N, or leave it out for a "
                    "random one"
                ) from exc
            raise SourceError(
                f"lost the binlog stream from {self._where}: {exc}; reopen from the last "
                "checkpoint once the server is back"
            ) from exc

    def confirm(self, position: str) -> None:
        """Nothing to tell the server: a MariaDB/MySQL replica holds no log on the
        primary. The binlog is kept by the server's own retention (binlog_expire_logs_
        seconds / expire_logs_days); a follower stopped longer than that finds a gap."""

    def close(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.close()
        control, self._control = self._control, None
        if control is not None:
            with contextlib.suppress(pymysql.Error):
                control.close()

    # -- internals -----------------------------------------------------------------------

    def _identity(self) -> str:
        """The followed database by the server's own identity, which every spelling of
        its address shares (127.0.0.1, localhost, a DNS name): MariaDB's server_uid
        (from a MAC address and the port) or MySQL's server_uuid, with the host name and
        port the server reports. Unlike PostgreSQL's system identifier it is not shared
        by replicas: a failover to a replica is a new identity (see Follower)."""
        found = dict(
            (str(name).lower(), str(value))
            for name, value in self._query(
                "SHOW GLOBAL VARIABLES WHERE Variable_name IN "
                "('server_uid', 'server_uuid', 'hostname', 'port')"
            )
        )
        uid = found.get("server_uid") or found.get("server_uuid") or "-"
        host = f"{found.get('hostname', '')}:{found.get('port', '')}"
        return f"mariadb:{uid}@{host}/{self.url.database}"

    def _settings(self, **extra: Any) -> dict[str, Any]:
        return {
            "host": self.url.host,
            "port": self.url.port,
            "user": self.url.user,
            "password": self.url.password,
            "connect_timeout": self.connect_timeout,
            "charset": "utf8mb4",
            **extra,
        }

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement on the control connection, connecting on first use."""
        for attempt in range(2):
            if self._control is None:
                self._control = self._connect()
            try:
                with self._control.cursor() as cursor:
                    cursor.execute(sql, tuple(args) or None)
                    return list(cursor.fetchall())
            except pymysql.OperationalError as exc:
                if exc.args[0] not in (2006, 2013) or attempt:
                    raise self._error(exc) from exc
                # An idle control connection dropped by wait_timeout: one fresh try.
                self._control = None
        raise AssertionError("unreachable")

    def _connect(self) -> Any:
        try:
            return pymysql.connect(
                **self._settings(database=self.url.database, autocommit=True, read_timeout=30)
            )
        except pymysql.Error as exc:
            raise self._error(exc) from exc

    def _error(self, exc: pymysql.Error) -> SourceError:
        code = exc.args[0] if exc.args else 0
        reason = _one_line(exc.args[1] if len(exc.args) > 1 else exc)
        if code == _ER_ACCESS_DENIED:
            return SourceError(
                f"{self._where} refused user {self.url.user!r}: {reason}; check the user "
                "and password in the source URL"
            )
        if code == _ER_BAD_DB:
            return SourceError(
                f"database {self.url.database!r} does not exist on {self._where}; fix "
                "the source URL"
            )
        if isinstance(exc, pymysql.OperationalError) and code >= 2000:
            return SourceError(f"cannot reach {self._where}: {reason}")
        return SourceError(f"{self._where} answered error {code}: {reason}")

    def _binlog_status(self) -> tuple[Any, ...] | None:
        """SHOW MASTER STATUS (file, offset), which also proves the user may read it."""
        try:
            try:
                rows = self._query("SHOW MASTER STATUS")
            except SourceError as exc:
                if f"error {_ER_PARSE}:" not in str(exc):
                    raise
                # MySQL 8.4 dropped the old name.
                rows = self._query("SHOW BINARY LOG STATUS")
        except SourceError as exc:
            if f"error {_ER_SPECIFIC_ACCESS_DENIED}:" in str(exc):
                raise SourceError(no_binlog_monitor(self._where, self.url.user)) from None
            raise
        return rows[0] if rows else None

    def _current_position(self, mariadb: bool, status: tuple[Any, ...] | None) -> Position:
        if mariadb:
            state = str(self._query("SELECT @@GLOBAL.gtid_binlog_pos")[0][0] or "")
            return GtidPosition.from_state(state)
        if status is None:
            raise SourceError(f"{self._where} reports no binlog (SHOW MASTER STATUS)")
        return FilePosition(str(status[0]), int(status[1]))

    def _start_reader(self, start: Position) -> BinlogReader:
        heartbeat = self.url.heartbeat
        server_id = self.url.server_id or random.randint(2**31, SERVER_ID_MAX)
        self._server_id = server_id
        # No read for 4 heartbeats means the server or the network is gone.
        settings = self._settings(read_timeout=max(4 * heartbeat, 1.0))
        reader = BinlogReader(
            settings,
            start,
            server_id=server_id,
            database=self.url.database,
            tables=self._tables,
            uuids=self._uuids,
            heartbeat=heartbeat,
        )
        try:
            reader.start()
        except StreamLost as exc:
            reader.close()
            raise SourceError(f"cannot reach {self._where}: {exc}") from exc
        except pymysql.Error as exc:
            reader.close()
            raise self._stream_error(exc, start) from exc
        return reader

    def _stream_error(self, exc: pymysql.Error, start: Position) -> SourceError:
        code = exc.args[0] if exc.args else 0
        reason = _one_line(exc.args[1] if len(exc.args) > 1 else exc)
        if code == _ER_SPECIFIC_ACCESS_DENIED:
            return SourceError(no_replication_slave(self._where, self.url.user))
        if code == _ER_MASTER_FATAL_READING_BINLOG:
            return LogGap(log_gone(self._where, str(start), reason))
        return self._error(exc)


def _one_line(value: object) -> str:
    return " ".join(str(value).split())
