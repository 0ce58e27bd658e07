"""Turn decoded binlog events into the follower's RowChange and TxEnd, in log order.

Where a transaction ends in the binlog:
- an XID event: the COMMIT of a transactional (InnoDB) transaction;
- a ``COMMIT`` query: the end of a transaction on non-transactional tables (Aria, MyISAM);
- a ``ROLLBACK`` query: a rolled-back transaction that changed non-transactional tables
  (those changes happened anyway, so they are delivered and the boundary passed);
- any other query outside a transaction: DDL, logged as its own one-statement group.
MariaDB opens each group with a GTID event (flag STANDALONE when no COMMIT follows);
MySQL opens it with a ``BEGIN`` query. A transaction rolled back on InnoDB alone is never
logged, so it yields nothing.

A query event that changes rows (TRUNCATE, which is logged as a statement, and any DML
logged as a statement: binlog_format STATEMENT or MIXED in the writer's session) carries
no row images: it is a TableReset of each followed table it names, never skipped.

No I/O: the reader thread feeds events in and hands the results on.
"""

from __future__ import annotations

import codecs
import re
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from pymysqlreplication.event import (
    MariadbGtidEvent,
    QueryEvent,
    RotateEvent,
    XidEvent,
)
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from seawall.cdc._events import Event, Operation, RowChange, TableReset, TxEnd
from seawall.cdc._mariadb_config import FilePosition, GtidPosition, Position

__all__ = ["EVENT_TYPES", "TransactionTracker"]

# What the stream must decode; the library always decodes table maps and rotations too.
EVENT_TYPES = [
    MariadbGtidEvent,
    QueryEvent,
    XidEvent,
    RotateEvent,
    WriteRowsEvent,
    UpdateRowsEvent,
    DeleteRowsEvent,
]

# MariaDB GTID event flag: the group is one statement with no COMMIT after it (DDL).
_FL_STANDALONE = 0x01
_ENDS = ("COMMIT", "ROLLBACK")
# The statements that change rows, after any leading comments: (the cause, as logged).
_CHANGES = re.compile(
    r"^(?:\s|/\*.*?\*/|#[^\n]*\n|--[^\n]*\n)*"
    r"(TRUNCATE|INSERT|REPLACE|UPDATE|DELETE|LOAD\s+DATA|LOAD\s+XML"
    # A table replaced under its name: the rename-swap migration, a DROP and CREATE.
    r"|RENAME\s+TABLES?|DROP\s+TABLE|CREATE\s+(?:OR\s+REPLACE\s+)?TABLE"
    r"|ALTER\s+(?:ONLINE\s+|IGNORE\s+)*TABLE)\b",
    re.IGNORECASE | re.DOTALL,
)
_DDL = ("RENAME", "DROP", "CREATE", "ALTER")
_WORDS = re.compile(r"`((?:[^`]|``)+)`|([A-Za-z0-9_$]+)")


class TransactionTracker:
    """Follows transaction boundaries and the position to resume after each one.

    In GTID mode the position after a transaction is the connect state with that
    transaction's GTID in its domain; in file mode it is the end offset of its last event.
    """

    def __init__(
        self,
        start: Position,
        database: str = "",
        tables: Iterable[str] | None = None,
        uuids: Mapping[str, frozenset[str]] | None = None,
    ) -> None:
        """`database` and `tables` (bare names; None: every table of the database) are
        what is followed: a statement-logged change naming one of them resets it."""
        self.position: Position = start
        self._database = database
        self._tables = None if tables is None else {t.lower(): t for t in tables}
        self._uuids = dict(uuids or {})  # "database.table" -> its UUID columns
        self._in_transaction = False
        self._pending_gtid: tuple[int, int, int] | None = None

    def feed(self, event: Any, log_file: str, log_pos: int) -> Event | list[Event] | None:
        """The events `event` yields; `log_file`/`log_pos` are where the stream is after it."""
        if isinstance(event, (WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent)):
            return rows_of(event, self._uuids)
        if isinstance(event, MariadbGtidEvent):
            self._pending_gtid = (event.domain_id, event.server_id, event.gtid_seq_no)
            self._in_transaction = not event.flags & _FL_STANDALONE
            return None
        if isinstance(event, XidEvent):
            return self._end(event, log_file, log_pos)
        if isinstance(event, QueryEvent):
            text = _text(event.query)
            query = text.strip().rstrip(";").strip().upper()
            if query == "BEGIN":
                self._in_transaction = True
                return None
            resets = self._resets(text, _text(event.schema))
            if query in _ENDS or not self._in_transaction:
                end: Event = self._end(event, log_file, log_pos)
                return [*resets, end]
            return resets or None
        return None

    def _resets(self, query: str, schema: str) -> list[Event]:
        """A TableReset per followed table a row-changing statement may have touched.

        Names are matched as words of the statement (quoted or not, any case): a
        followed table named anywhere in it is reset, whatever the statement's shape
        (a join, a subquery, INSERT ... SELECT). A table qualified by another
        database is still reset: a false match costs a cleared namespace, a miss a
        stale cache. Rows changed by triggers are not named and not seen."""
        found = _CHANGES.match(query)
        if found is None:
            return []
        cause = " ".join(found.group(1).upper().split())
        named = {
            (quoted.replace("``", "`") if quoted else bare).lower()
            for quoted, bare in _WORDS.findall(query)
        }
        if cause.startswith("ALTER") and "rename" not in named:
            return []  # a table changed in place keeps its rows
        if cause.startswith(_DDL):
            cause = f"{cause.split()[0]} TABLE"
        elif cause != "TRUNCATE":
            cause = f"a statement-logged {cause}"
        if self._database.lower() not in named and schema != self._database:
            return []  # another database's statement, naming none of ours
        if self._tables is None:
            return []  # no table list to match: rows of every table are decoded anyway
        return [
            TableReset(f"{self._database}.{name}", cause)
            for key, name in self._tables.items()
            if key in named
        ]

    def _end(self, event: Any, log_file: str, log_pos: int) -> TxEnd:
        position = self.position
        if isinstance(position, GtidPosition):
            if self._pending_gtid is not None:
                position = position.advance(*self._pending_gtid)
        else:
            position = FilePosition(log_file, log_pos)
        self.position = position
        self._in_transaction = False
        self._pending_gtid = None
        timestamp = getattr(event, "timestamp", 0)
        return TxEnd(str(position), float(timestamp) if timestamp else None)


def rows_of(event: Any, uuids: Mapping[str, frozenset[str]] | None = None) -> list[Event]:
    """One RowChange per row of a rows event, table qualified as ``database.table``.

    A row that cannot be decoded is a TableReset of its table (the caller clears the
    namespaces it feeds): never an error that would end the stream at the same event
    on every reconnect."""
    table = f"{event.schema}.{event.table}"
    # The rows are decoded on first access, below: with MariaDB's latin1, not Python's.
    event.charset_to_encoding = _encoding
    try:
        rows = _rows(event, table)
    except (UnicodeError, ValueError, LookupError) as exc:
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
        return [TableReset(table, f"a row that could not be decoded ({reason})")]
    columns = (uuids or {}).get(table)
    if not columns:
        return rows
    return [_with_uuids(change, columns) for change in rows]


def _with_uuids(change: Event, columns: frozenset[str]) -> Event:
    if not isinstance(change, RowChange):
        return change
    old = None if change.old is None else _uuid_text(change.old, columns)
    return RowChange(change.table, change.op, _uuid_text(change.row, columns), old)


def _uuid_text(row: Mapping[str, Any], columns: frozenset[str]) -> dict[str, Any]:
    out = dict(row)
    for name in columns:
        value = out.get(name)
        if isinstance(value, bytes) and len(value) <= 16:
            # The binlog stores a fixed-length binary value with its trailing zero bytes
            # stripped (as CHAR strips its pad): a UUID ending in 00 comes shorter.
            out[name] = str(uuid.UUID(bytes=value.ljust(16, b"\0")))
    return out


def _rows(event: Any, table: str) -> list[Event]:
    changes: list[Event] = []
    if isinstance(event, UpdateRowsEvent):
        for row in event.rows:
            after, before = _plain(row["after_values"]), _plain(row["before_values"])
            changes.append(RowChange(table, "update", after, before))
    else:
        op: Operation = "insert" if isinstance(event, WriteRowsEvent) else "delete"
        for row in event.rows:
            changes.append(RowChange(table, op, _plain(row["values"])))
    return changes


# MariaDB's (and MySQL's) latin1 is Windows-1252 with its five undefined bytes (0x81,
# 0x8D, 0x8F, 0x90, 0x9D) kept as the C1 controls of the same number; Python's cp1252,
# which the library uses for it, refuses them.
_LATIN1 = "seawall_mariadb_latin1"
_C1 = "seawall_c1"


def _c1(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeDecodeError):
        raise error
    return chr(error.object[error.start]), error.start + 1


def _decode_latin1(data: Any, errors: str = "strict", /) -> tuple[str, int]:
    return codecs.decode(bytes(data), "cp1252", _C1), len(data)


def _search(name: str) -> codecs.CodecInfo | None:
    if name != _LATIN1:
        return None
    return codecs.CodecInfo(codecs.lookup("cp1252").encode, _decode_latin1, name=_LATIN1)


codecs.register_error(_C1, _c1)
codecs.register(_search)


def _encoding(charset: str) -> str:
    from pymysql.charset import charset_by_name

    found = charset_by_name(charset)
    encoding = found.encoding if found else charset
    return _LATIN1 if encoding == "cp1252" else encoding


def _plain(values: Mapping[str, Any]) -> dict[str, Any]:
    # The library already decodes to int, str, Decimal, datetime, bytes; a plain dict
    # keeps the follower from holding the library's objects.
    return dict(values)


def _text(query: str | bytes) -> str:
    return query.decode("utf-8", "replace") if isinstance(query, bytes) else query
