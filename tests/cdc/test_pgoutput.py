"""Decoding pgoutput messages (pure): built byte by byte from the documented layouts."""

from __future__ import annotations

import struct

from seawall.cdc._events import RowChange, TableReset, TxEnd
from seawall.cdc._pgoutput import Decoder, format_lsn, parse_lsn


def _s(text: str) -> bytes:
    return text.encode() + b"\0"


def _relation(oid: int = 16384) -> bytes:
    columns = [("id", 23, 1), ("email", 25, 0), ("name", 25, 0)]
    body = b"R" + struct.pack("!I", oid) + _s("public") + _s("users") + b"d"
    body += struct.pack("!h", len(columns))
    for name, typ, flags in columns:
        body += bytes([flags]) + _s(name) + struct.pack("!Ii", typ, -1)
    return body


def _tuple(*values: str | None) -> bytes:
    body = struct.pack("!h", len(values))
    for value in values:
        if value is None:
            body += b"n"
        elif value == "<toast>":
            body += b"u"
        else:
            raw = value.encode()
            body += b"t" + struct.pack("!i", len(raw)) + raw
    return body


def test_rows_and_commit() -> None:
    decoder = Decoder()
    assert decoder.feed(_relation()) == []
    assert decoder.feed(b"B" + struct.pack("!QqI", 100, 0, 7)) == []
    oid = struct.pack("!I", 16384)
    insert = decoder.feed(b"I" + oid + b"N" + _tuple("42", "a@x", None))
    assert insert == [RowChange("public.users", "insert", {"id": 42, "email": "a@x", "name": None})]
    update = decoder.feed(
        b"U" + oid + b"K" + _tuple("42", None, None) + b"N" + _tuple("43", "a@x", "<toast>")
    )
    assert update == [
        RowChange(
            "public.users",
            "update",
            {"id": 43, "email": "a@x"},
            {"id": 42, "email": None, "name": None},
        )
    ]
    plain = decoder.feed(b"U" + oid + b"N" + _tuple("43", "b@x", "Bo"))
    assert plain[0].old is None and plain[0].row["email"] == "b@x"
    delete = decoder.feed(b"D" + oid + b"K" + _tuple("43", None, None))
    assert delete == [RowChange("public.users", "delete", {"id": 43, "email": None, "name": None})]
    micros = 10 * 1_000_000  # 2000-01-01 00:00:10 UTC
    commit = decoder.feed(b"C" + b"\0" + struct.pack("!QQq", 0x16B3700, 0x1_0000_0010, micros))
    assert commit == [TxEnd("1/10", 946_684_810.0)]


def test_truncate_resets_the_table_and_unknown_messages_are_ignored() -> None:
    decoder = Decoder()
    decoder.feed(_relation())
    truncate = decoder.feed(b"T" + struct.pack("!i", 1) + b"\0" + struct.pack("!I", 16384))
    assert truncate == [TableReset("public.users", "TRUNCATE")]
    assert decoder.feed(b"O" + struct.pack("!Q", 5) + _s("origin")) == []


def test_lsn_text_round_trips() -> None:
    assert format_lsn(0x16_B374_D848) == "16/B374D848"
    assert parse_lsn("16/B374D848") == 0x16_B374_D848
    assert parse_lsn(format_lsn(0)) == 0
