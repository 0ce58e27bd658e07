"""Decoding PostgreSQL's pgoutput logical replication messages (protocol version 1; pure).

The message layouts are PostgreSQL's documented "Logical Replication Message Formats".
Only what the follower needs is kept: Relation (to name tables and their columns),
Insert/Update/Delete (rows as text, integers as int so they key the cache the way
`cache.get_or_load(42, ...)` does), and Commit (the position to checkpoint). Begin,
Origin, Type and Message need nothing; Truncate is a TableReset of each truncated table
(the log carries no keys for it).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from seawall.cdc._events import Event, RowChange, TableReset, TxEnd

__all__ = ["Decoder", "Relation", "format_lsn", "parse_lsn"]

# Seconds between the Unix epoch and PostgreSQL's (2000-01-01 UTC).
_PG_EPOCH = 946_684_800
# int2, int4, int8, oid: their text form is a plain decimal integer.
_INTEGER_TYPES = frozenset({20, 21, 23, 26})

_I16 = struct.Struct("!h")
_I32 = struct.Struct("!i")
_U32 = struct.Struct("!I")
_I64 = struct.Struct("!q")
_U64 = struct.Struct("!Q")


def format_lsn(lsn: int) -> str:
    """PostgreSQL's text form of an LSN: "16/B374D848"."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def parse_lsn(text: str) -> int:
    high, sep, low = text.partition("/")
    if not sep:
        raise ValueError(f"{text!r} is not an LSN (expected HIGH/LOW in hex, e.g. 0/16B3748)")
    return (int(high, 16) << 32) | int(low, 16)


@dataclass(slots=True)
class Relation:
    table: str  # "schema.table"
    columns: list[str]
    types: list[int]
    replica_identity: str  # d default, n nothing, f full, i index


@dataclass(slots=True)
class Decoder:
    """Turns a stream of pgoutput payloads into RowChange/TxEnd events."""

    relations: dict[int, Relation] = field(default_factory=dict)
    _pos: int = 0
    _data: bytes = b""

    def feed(self, payload: bytes) -> list[Event]:
        self._data, self._pos = payload, 1
        kind = payload[:1]
        if kind == b"I":
            relation = self._relation()
            self._expect(b"N")
            return [RowChange(relation.table, "insert", self._tuple(relation))]
        if kind == b"U":
            relation = self._relation()
            marker = self._byte()
            old = None
            if marker in (b"K", b"O"):
                old = self._tuple(relation)
                marker = self._byte()
            if marker != b"N":
                raise ValueError(f"pgoutput update: expected 'N', got {marker!r}")
            return [RowChange(relation.table, "update", self._tuple(relation), old)]
        if kind == b"D":
            relation = self._relation()
            marker = self._byte()
            if marker not in (b"K", b"O"):
                raise ValueError(f"pgoutput delete: expected 'K' or 'O', got {marker!r}")
            return [RowChange(relation.table, "delete", self._tuple(relation))]
        if kind == b"C":
            self._pos += 1  # flags
            self._unpack(_U64)  # the commit record's own LSN
            end_lsn = self._unpack(_U64)
            committed = self._unpack(_I64)
            return [TxEnd(format_lsn(end_lsn), _PG_EPOCH + committed / 1_000_000)]
        if kind == b"R":
            self._read_relation()
        elif kind == b"T":
            return self._read_truncate()
        return []

    # -- the parts ----------------------------------------------------------------------

    def _read_relation(self) -> None:
        oid = self._unpack(_U32)
        schema, name = self._string(), self._string()
        identity = self._byte().decode()
        count = self._unpack(_I16)
        columns, types = [], []
        for _ in range(count):
            self._pos += 1  # flags: 1 = part of the key
            columns.append(self._string())
            types.append(self._unpack(_U32))
            self._pos += 4  # type modifier
        self.relations[oid] = Relation(f"{schema}.{name}", columns, types, identity)

    def _read_truncate(self) -> list[Event]:
        count = self._unpack(_I32)
        self._pos += 1  # options (CASCADE, RESTART IDENTITY)
        events: list[Event] = []
        for _ in range(count):
            # The server sends each relation's Relation message before its Truncate.
            relation = self._relation()
            events.append(TableReset(relation.table, "TRUNCATE"))
        return events

    def _relation(self) -> Relation:
        oid = self._unpack(_U32)
        relation = self.relations.get(oid)
        if relation is None:
            # The server always sends a Relation before a relation's first row.
            raise ValueError(f"pgoutput: a row of relation {oid} came before its Relation")
        return relation

    def _tuple(self, relation: Relation) -> dict[str, Any]:
        count = self._unpack(_I16)
        row: dict[str, Any] = {}
        for index in range(count):
            kind = self._byte()
            if kind == b"n":
                row[relation.columns[index]] = None
            elif kind == b"t":
                size = self._unpack(_I32)
                raw = self._data[self._pos : self._pos + size]
                self._pos += size
                try:
                    text = raw.decode()
                except UnicodeDecodeError:
                    # Not UTF-8 even so (a SQL_ASCII database holds any bytes): kept as
                    # bytes, which key no cache entry (the follower clears the
                    # namespace if it is a key) and harm no other column.
                    row[relation.columns[index]] = raw
                    continue
                typ = relation.types[index]
                row[relation.columns[index]] = int(text) if typ in _INTEGER_TYPES else text
            elif kind != b"u":  # u: an unchanged TOASTed value, not sent
                raise ValueError(f"pgoutput: unknown column kind {kind!r}")
        return row

    def _byte(self) -> bytes:
        value = self._data[self._pos : self._pos + 1]
        self._pos += 1
        return value

    def _expect(self, marker: bytes) -> None:
        got = self._byte()
        if got != marker:
            raise ValueError(f"pgoutput: expected {marker!r}, got {got!r}")

    def _unpack(self, fmt: struct.Struct) -> int:
        (value,) = fmt.unpack_from(self._data, self._pos)
        self._pos += fmt.size
        return int(value)

    def _string(self) -> str:
        end = self._data.index(b"\0", self._pos)
        text = self._data[self._pos : end].decode()
        self._pos = end + 1
        return text
