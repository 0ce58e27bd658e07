"""PostgreSQL as a change-log source: logical decoding (pgoutput) through a replication slot.

The client is psycopg2 (`psycopg2-binary`): its `LogicalReplicationConnection` speaks the
streaming replication protocol, including standby status updates (the flush LSN that lets
PostgreSQL free WAL); psycopg 3 has no replication-protocol support. pgoutput is built
into PostgreSQL 10+, needs no server extension, and decodes only the tables of its
publication, so a busy database whose other tables change costs the follower nothing.

URL: postgresql://user[:password]@host:port/dbname[?slot=NAME&publication=NAME&stream_timeout=S]
(defaults: slot and publication "seawall_<dbname>"). Both are created when missing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import re
import select
import time
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from seawall.cdc._events import (
    Event,
    LogGap,
    SourceError,
    TableReset,
    TxEnd,
    Watched,
    watched_columns,
)
from seawall.cdc._pgoutput import Decoder, format_lsn, parse_lsn

try:
    import psycopg2
    import psycopg2.errors
    import psycopg2.extensions
    import psycopg2.extras
except ImportError as exc:  # pragma: no cover - exercised without the extra only
    raise ImportError(
        "following PostgreSQL needs psycopg2: pip install 'seawall[cdc-postgresql]'"
    ) from exc

from seawall.cdc._postgres_setup import PostgresSetup, first_line, qualified

__all__ = ["PostgresSource", "source_from_url"]

log = logging.getLogger("seawall.cdc")

DEFAULT_SCHEMA = "public"
# The most messages one read() returns: big enough that a busy stream is invalidated in
# large pipelined batches, small enough to checkpoint often.
_BATCH = 5000
# How often psycopg2 sends standby status (the flush LSN) unasked.
_STATUS_INTERVAL = 1.0
# A stream with no server traffic (data or a reply to our keepalive requests) for this
# long is lost (a stopped walsender, a network black hole): ?stream_timeout=SECONDS.
_STREAM_TIMEOUT = 30.0
# TCP keepalives for every connection unless the URL sets its own: a dead peer is
# noticed by the kernel too, not only by the stream's own timeout.
_TCP_KEEPALIVES = {
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "5",
    "keepalives_count": "3",
}
# How often the followed tables' OIDs are looked at (a rename-swap, a DROP and CREATE).
_TABLE_CHECK = 1.0


# A position this source hands out is the LSN followed by the OIDs of the followed tables
# at that point of the stream ('0/16B3748 {"public.users":16384}'): a checkpoint then says
# which table each followed name meant when everything before it was invalidated. A
# follower that added a replaced table to the publication, then stopped before clearing
# its namespaces, leaves a checkpoint with the old OID, and the next open() clears them.
def _with_oids(lsn: str, oids: Mapping[str, int | None]) -> str:
    return f"{lsn} {json.dumps(dict(sorted(oids.items())), separators=(',', ':'))}"


def _lsn_of(position: str) -> str:
    return position.partition(" ")[0]


def _oids_of(position: str) -> dict[str, int | None] | None:
    """The OIDs a position carries; None for a bare LSN (written by an earlier version)."""
    text = position.partition(" ")[2]
    if not text:
        return None
    try:
        found = json.loads(text)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


class PostgresSource(PostgresSetup):
    """Follows one database through one logical replication slot (see the module doc)."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        # An application's SQLAlchemy URL (postgresql+psycopg://) names the same server.
        parts = parts._replace(scheme=parts.scheme.partition("+")[0].lower())
        if parts.scheme not in ("postgresql", "postgres"):
            raise SourceError(f"{url!r} is not a postgresql:// URL")
        self.dbname = unquote(parts.path.lstrip("/")) or "postgres"
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        default = "seawall_" + re.sub(r"[^a-z0-9_]", "_", self.dbname.lower())
        self.slot = query.pop("slot", default)[:63]
        self.publication = query.pop("publication", default)
        try:
            self.stream_timeout = float(query.pop("stream_timeout", _STREAM_TIMEOUT))
        except ValueError:
            self.stream_timeout = 0.0
        if not 0.5 <= self.stream_timeout <= 3600:
            raise SourceError(
                f"{url!r}: stream_timeout must be seconds from 0.5 to 3600 (the longest the "
                "replication stream may stay silent before the follower reconnects)"
            )
        if not re.fullmatch(r"[a-z0-9_]{1,63}", self.slot):
            raise SourceError(
                f"slot name {self.slot!r}: PostgreSQL allows only lower-case letters, digits "
                "and _ (at most 63); pass ?slot=NAME in the URL"
            )
        self._params: dict[str, Any] = {
            "host": parts.hostname or "localhost",
            "port": parts.port or 5432,
            "dbname": self.dbname,
            "user": unquote(parts.username) if parts.username else None,
            "password": unquote(parts.password) if parts.password else None,
            "connect_timeout": 5,
            **_TCP_KEEPALIVES,
            **query,  # sslmode and other libpq parameters pass through
        }
        self._params = {k: v for k, v in self._params.items() if v is not None}
        #: Where a bare `--map users=...` table lives.
        self.default_schema = DEFAULT_SCHEMA
        self.where = f"PostgreSQL {self._params['host']}:{self._params['port']}/{self.dbname}"
        self.name = (
            f"postgresql://{self._params['host']}:{self._params['port']}/{self.dbname}/{self.slot}"
        )
        self._tables: dict[str, Watched] = {}
        self._oids: dict[str, int | None] = {}  # the followed tables' OIDs as last seen
        #: What followers elect by and checkpoint under: the server's identity, known
        #: once watch() has connected (see _identity).
        self.election_name: str | None = None
        self._next_check = 0.0
        self._unpublished: list[Event] = []  # resets open() found, for the next read()
        self._sql: Any = None
        self._stream: Any = None
        self._cursor: Any = None
        self._decoder = Decoder()
        self._received = self._confirmed = 0

    # -- the contract ---------------------------------------------------------------------

    def key_columns(self, table: str) -> Sequence[str]:
        table = self._full(table)
        with self._one_line():
            row = self._query("SELECT to_regclass(%s)::oid", (qualified(table),))
            if row is None or row[0] is None:
                raise SourceError(
                    f"table {table} does not exist in {self.where}: create it, or fix --map "
                    "(SCHEMA.TABLE; a bare name means the public schema)"
                )
            rows = self._query_all(
                "SELECT a.attname FROM pg_index i JOIN pg_attribute a "
                "ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
                "WHERE i.indrelid = %s AND i.indisprimary "
                "ORDER BY array_position(i.indkey::int2[], a.attnum)",
                (row[0],),
            )
        return [r[0] for r in rows]

    def watch(self, columns: Mapping[str, Watched]) -> None:
        """The tables to follow, each with the column it is keyed by (None: primary key;
        several when it feeds several namespaces).

        PostgreSQL logs only the replica identity (the primary key by default) of a
        deleted row and of an updated row's old version, refuses updates to a published
        table with none, and never sends generated columns: refuse what would break the
        application or lose keys, each with the fix.
        """
        tables: dict[str, Watched] = {}
        with self._one_line():
            for name, value in columns.items():
                table = self._full(name)
                for column in watched_columns(value):
                    self._check_keyable(table, column)
                tables[table] = value
            self._tables = tables
            self._oids = self._table_oids()
            self._check_server()
            self.election_name = self._identity()

    def _check_tables(self) -> list[Event]:
        """A TableReset per followed table replaced since the last look.

        A publication names tables by OID, and pgoutput sends no DDL: a table renamed
        away, swapped with another (the rename-swap migration) or dropped and created
        again leaves the follower reading the old table, or nothing. The new table is
        added to the publication first, then its namespaces are cleared: what changed in
        between was never sent, a change after the addition is."""
        self._next_check = time.monotonic() + _TABLE_CHECK
        with self._one_line():
            now = self._table_oids()
            changed = [t for t, oid in now.items() if oid != self._oids.get(t)]
            if not changed:
                return []
            if any(now[t] is not None for t in changed):
                for table in changed:
                    if now[table] is not None:
                        for column in watched_columns(self._tables[table]):
                            self._check_keyable(table, column)
                self._ensure_publication()
        self._oids = now
        events: list[Event] = []
        for table in changed:
            what = "dropped or renamed away" if now[table] is None else "replaced"
            cause = f"the table was {what} (a rename, a swap, or a DROP and CREATE)"
            events.append(TableReset(table, cause))
        return events

    def open(self, resume_after: str | None) -> None:
        self.close()
        with self._one_line():
            self._check_server()
            added = self._ensure_publication()
            if resume_after:
                # A followed table the publication did not name until now (replaced by
                # a rename-swap, or dropped and created again, while no follower watched
                # it): its changes since the checkpoint were never in the stream, so its
                # namespaces are cleared at the next read, now that it is published
                # (kept until then, whatever fails first). A first start owes nothing.
                cause = "the table was not published (replaced while no follower watched)"
                self._unpublished += [TableReset(t, cause) for t in added]
            if resume_after:
                self._unpublished += self._replaced_since(resume_after, added)
            slot_lsn = self._ensure_slot()
            if resume_after:
                self._check_gap(_lsn_of(resume_after), slot_lsn)
        try:
            # pgoutput sends text in the connection's client encoding: UTF-8 whatever
            # the database's own (a LATIN1 database's values would not decode).
            self._stream = psycopg2.connect(
                connection_factory=psycopg2.extras.LogicalReplicationConnection,
                **{"client_encoding": "UTF8", **self._params},
            )
            self._cursor = self._stream.cursor()
            self._cursor.start_replication(
                slot_name=self.slot,
                decode=False,
                start_lsn=parse_lsn(_lsn_of(resume_after)) if resume_after else 0,
                options={"proto_version": "1", "publication_names": self.publication},
                status_interval=_STATUS_INTERVAL,
            )
        except psycopg2.Error as exc:
            self.close()
            raise SourceError(
                f"cannot stream from slot {self.slot} of {self.where}: {first_line(exc)}"
            ) from None
        self._decoder = Decoder()
        self._offered = 0  # the last idle position handed on as a TxEnd
        self._heard = self._asked = time.monotonic()  # server traffic; our last ask
        self._received = 0  # the last data message's position
        self._confirmed = parse_lsn(_lsn_of(resume_after)) if resume_after else 0

    def _replaced_since(self, resume_after: str, added: Sequence[str]) -> list[Event]:
        """A TableReset per followed table whose OID differs from the one `resume_after`
        was checkpointed with (the follower that saw it replaced stopped before its
        clear: see _with_oids). Tables just added to the publication are reset already."""
        then = _oids_of(resume_after)
        if then is None:
            return []
        now = self._table_oids()
        cause = "the table was replaced, and the follower that saw it stopped before clearing"
        return [
            TableReset(table, cause)
            for table, oid in then.items()
            if oid is not None and table in now and now[table] != oid and table not in added
        ]

    def read(self, timeout: float) -> Sequence[Event]:
        events = self._read(timeout)
        if not any(isinstance(e, TxEnd) for e in events):
            return events
        # Every transaction end of this batch comes after the resets of its table check:
        # its position carries the OIDs those resets stand for.
        return [
            dataclasses.replace(e, position=_with_oids(e.position, self._oids))
            if isinstance(e, TxEnd)
            else e
            for e in events
        ]

    def _read(self, timeout: float) -> Sequence[Event]:
        cursor = self._cursor
        if cursor is None:
            raise SourceError(f"{self.where}: read() before open()")
        events: list[Event] = []
        deadline = time.monotonic() + timeout
        if self._unpublished:
            events += self._unpublished
            self._unpublished = []
        if time.monotonic() >= self._next_check:
            events += self._check_tables()
        try:
            while len(events) < _BATCH:
                message = cursor.read_message()
                if message is not None:
                    self._heard = time.monotonic()
                    self._received = max(self._received, message.data_start)
                    events += self._decoder.feed(message.payload)
                    continue
                if events:
                    break
                self._check_alive(cursor)
                idle = self._heartbeat(cursor)
                if idle is not None:
                    events.append(idle)
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                # read_message() sends due status updates; wake for them at least.
                wait = min(remaining, _STATUS_INTERVAL, self.stream_timeout / 4)
                if select.select([cursor], [], [], wait)[0]:
                    # The server sent something: data for read_message(), or a
                    # keepalive it takes in without returning a message.
                    self._heard = time.monotonic()
        except psycopg2.Error as exc:
            raise SourceError(
                f"lost the replication stream of {self.where}: {first_line(exc)}"
            ) from None
        return events

    def confirm(self, position: str) -> None:
        if self._cursor is None:
            return
        self._confirmed = max(self._confirmed, parse_lsn(_lsn_of(position)))
        try:
            self._cursor.send_feedback(flush_lsn=self._confirmed)
        except psycopg2.Error as exc:
            raise SourceError(
                f"lost the replication stream of {self.where}: {first_line(exc)}"
            ) from None

    def _check_alive(self, cursor: Any) -> None:
        """Raise SourceError once the server has been silent for stream_timeout.

        An idle stream is silent too, so from a quarter of the timeout on the follower
        asks the server for a reply (a standby status update with the reply flag); the
        server answers with a keepalive. A keepalive is seen as the socket turning
        readable, or as psycopg2's io_timestamp (its last exchange either way) passing its
        feedback_timestamp (its last status update sent). A stopped walsender or a
        black-holed network never answers."""
        now = time.monotonic()
        received, sent = cursor.io_timestamp, cursor.feedback_timestamp
        if received is not None and sent is not None and received > sent:
            # Its last exchange with the server was a receipt after our last status
            # update: a keepalive read_message() took in without returning a message.
            self._heard = now
        silent = now - self._heard
        if silent >= self.stream_timeout:
            raise SourceError(
                f"the replication stream of {self.where} was silent for {silent:.1f} s (no "
                "data, no answer to keepalive requests: a stopped server process or a lost "
                "network); reconnecting"
            )
        quarter = self.stream_timeout / 4
        if silent >= quarter and now - self._asked >= quarter:
            self._asked = now
            cursor.send_feedback(reply=True, force=True)

    def _heartbeat(self, cursor: Any) -> TxEnd | None:
        """Let an idle or fully filtered slot free its WAL.

        The server's keepalives carry how far it has decoded (wal_end), including WAL of
        other tables and databases that the publication filters out. When everything
        received is confirmed, nothing of ours lies before wal_end: hand it on as an
        empty transaction's end, which the follower checkpoints and then confirms, or
        the slot would hold that WAL until the next change of a followed table. (Never
        confirmed here directly: the slot must never be ahead of the checkpoint, which
        is how a slot dropped and recreated is told apart, see _check_gap.)
        """
        wal_end = int(cursor.wal_end or 0)
        if self._confirmed >= self._received and wal_end > max(self._confirmed, self._offered):
            self._offered = wal_end
            return TxEnd(format_lsn(wal_end))
        return None

    def _check_gap(self, resume_after: str, slot_lsn: int | None) -> None:
        """LogGap when the slot cannot serve the changes after the checkpoint.

        The follower confirms only what it has checkpointed, so a slot confirmed past the
        checkpoint (or created just now) was dropped and recreated, or read by someone
        else, and a checkpoint past the server's WAL names a server restored to an
        earlier point or rebuilt at the same address: streaming from either would skip
        changes, or (psycopg2 confirming the checkpoint) move the slot past them."""
        checkpoint = parse_lsn(resume_after)
        current = self._query("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn")
        if current is not None and checkpoint > int(current[0]):
            raise LogGap(
                f"the checkpoint {resume_after} is ahead of the WAL of {self.where} (at "
                f"{format_lsn(int(current[0]))}): a server restored to an earlier point, or "
                "another server at the same address"
            )
        if slot_lsn is None or slot_lsn > checkpoint:
            what = "was created just now" if slot_lsn is None else "is confirmed past it"
            raise LogGap(
                f"replication slot {self.slot} of {self.where} {what}, so the changes after "
                f"the checkpoint {resume_after} are gone (the slot was dropped, or a "
                "failover went to a server without it)"
            )

    def close(self) -> None:
        for conn in (self._stream, self._sql):
            if conn is not None:
                with contextlib.suppress(psycopg2.Error):
                    conn.close()
        self._stream = self._cursor = self._sql = None


def source_from_url(url: str) -> PostgresSource:
    return PostgresSource(url)
