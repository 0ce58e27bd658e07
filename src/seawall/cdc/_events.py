"""What a change-log source hands the follower, and what it must promise.

Every source (PostgreSQL, MariaDB/MySQL) speaks this contract, so the follower's loop,
its checkpoint and its election are written once (SQLAlchemy's dialect model).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from seawall.errors import SeawallError

Operation = Literal["insert", "update", "delete"]


class SourceError(SeawallError):
    """A source that cannot be followed: unreachable, log not enabled, missing table.

    The message is one line that names the problem and the fix, e.g. "wal_level is
    replica; set wal_level=logical in postgresql.conf and restart the server".
    """


class LogGap(SourceError):
    """The log no longer goes back to the position asked for: the changes in between
    were never seen (a purged binlog, a replication slot dropped or recreated, a server
    restored to an earlier point). The follower clears the mapped namespaces and follows
    from the source's current position, or stops (`on_gap="stop"`)."""


@dataclass(frozen=True, slots=True)
class RowChange:
    """One row inserted, updated or deleted, in log order.

    `table` is qualified: "schema.table" for PostgreSQL, "database.table" for MariaDB.
    `row` holds the values the log carries: the new row for insert and update, the old
    row (at least its key columns) for delete. `old` is the row before an update when
    the log carries it (always with MariaDB's FULL row image; with PostgreSQL when the
    key changed or REPLICA IDENTITY is FULL), else None.
    """

    table: str
    op: Operation
    row: Mapping[str, Any]
    old: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class TxEnd:
    """A transaction boundary: everything before it is one committed transaction.

    `position` is opaque text the source can resume after (an LSN, a GTID, or
    "file:offset"; after a space, whatever else the source keeps with it, which the
    follower does not show); the follower checkpoints it once the changes before it
    are invalidated. `committed_at` is the commit's wall-clock time (seconds since the
    epoch) when the log has it, for lag.
    """

    position: str
    committed_at: float | None = None


@dataclass(frozen=True, slots=True)
class TableReset:
    """Rows of `table` changed in a way the log does not carry row by row: every cached
    row of it may be stale, so the follower clears the table's cache namespaces.

    `cause` says why, in a few words ("TRUNCATE", "a statement-logged UPDATE"); the
    follower warns once per cause and table (rate-limited)."""

    table: str
    cause: str


Event = RowChange | TxEnd | TableReset

#: What `watch` takes per table: the column it is keyed by (None: the primary key), or
#: several when the table feeds several cache namespaces keyed differently.
Watched = str | None | Sequence[str | None]


def watched_columns(value: Watched) -> list[str | None]:
    """The columns of one `watch` entry, as a list."""
    if value is None or isinstance(value, str):
        return [value]
    return list(value)


class Source(Protocol):
    """A database change log the follower can follow (sync; one thread reads it)."""

    #: A stable identity of what is followed (server, database, slot or server id):
    #: the checkpoint and the election lock are keyed by it.
    name: str

    def key_columns(self, table: str) -> Sequence[str]:
        """The primary key columns of `table`; SourceError if there is no such table."""
        ...

    def open(self, resume_after: str | None) -> str | None:
        """Check the server can be followed and start reading after `resume_after`
        (None: from the source's own durable position, or from now). SourceError with a
        one-line message otherwise.

        Returns the position reading starts after when the server does not keep it
        (MariaDB's "now"), else None (PostgreSQL's slot keeps it). The follower
        checkpoints it at once: a successor then resumes there, not at its own later
        "now", which would skip what was committed in between."""
        ...

    def read(self, timeout: float) -> Sequence[Event]:
        """The next events in log order; an empty sequence after `timeout` seconds with
        none. Keeps the connection alive (keepalives, heartbeats) while called. A change
        the log does not carry row by row (TRUNCATE, a statement-logged DML) is a
        TableReset of each followed table it may have touched, never silence."""
        ...

    def confirm(self, position: str) -> None:
        """Everything up to `position` is invalidated and checkpointed: the server may
        free its log up to there (PostgreSQL: the slot's flush LSN; MariaDB: nothing)."""
        ...

    def close(self) -> None: ...
