"""The default serializer reads back exactly what it was given, or refuses it."""

from __future__ import annotations

import datetime
import enum
import json
import uuid
import zlib
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from seawall import _cache_json
from seawall._cache_codec import canonical, encode, make_serializer
from seawall.errors import CacheSerializationError

ROW: dict[str, Any] = {
    "id": 7,
    "price": Decimal("19.990"),
    "created": datetime.datetime(2026, 3, 1, 12, 30, 5, 123456),
    "paid": datetime.datetime(2026, 3, 1, 12, 31, tzinfo=datetime.UTC),
    "local": datetime.datetime(2026, 3, 29, 2, 30, tzinfo=ZoneInfo("Europe/Paris")),
    "day": datetime.date(2026, 2, 28),
    "at": datetime.time(23, 59, 59, 1),
    "ref": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "blob": b"\x00\xff~z",
    "tags": ("a", "b"),
    "nested": {1: "one", (2, 3): ["x", {"~": 1}], None: frozenset({1})},
    "odd": [float("inf"), -0.0, 10**30, {"~": "a dict whose only key is the tag"}],
    "set": {1, 2},
}


def test_a_database_row_comes_back_with_its_types_and_values() -> None:
    codec = make_serializer("json")
    back = codec.loads(codec.dumps(ROW))
    assert back == ROW
    for name, value in ROW.items():
        assert type(back[name]) is type(value), name
    assert back["local"].tzinfo == ZoneInfo("Europe/Paris")
    assert back["price"].as_tuple() == ROW["price"].as_tuple()  # 19.990, not 19.99
    assert type(back["nested"]) is dict and (2, 3) in back["nested"]
    nan = codec.loads(codec.dumps(float("nan")))
    assert nan != nan


def test_plain_values_are_written_as_before_and_old_payloads_are_read() -> None:
    codec = make_serializer("json")
    plain = {"a": [1, "é", 2.5, True, None], "b": {"c": 10**30}}
    payload = codec.dumps(plain)
    assert payload == json.dumps(plain, separators=(",", ":"), ensure_ascii=False).encode()
    assert codec.loads(payload) == plain
    # A payload of an older seawall, which turned keys into str and tuples into lists.
    assert codec.loads(b'{"1":"one","t":[1,2]}') == {"1": "one", "t": [1, 2]}
    # What an older seawall makes of a tagged payload: not JSON, so a miss, never a value.
    with pytest.raises(json.JSONDecodeError):
        json.loads(codec.dumps({1: "one"}))


def test_what_cannot_come_back_exactly_is_refused_when_written() -> None:
    class Colour(enum.Enum):
        RED = 1

    class Name(str):
        pass

    codec = make_serializer("json")
    refused = [
        Colour.RED,
        Name("x"),
        [object()],
        datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC).astimezone(_Zone()),
    ]
    for bad in refused:
        with pytest.raises(CacheSerializationError, match=r"key 'k'.*json serializer"):
            encode(codec, bad, "n", "k")
    with pytest.raises(ValueError, match="unknown tag"):
        codec.loads(b'~{"~":["nope",1]}')


def test_large_payloads_are_compressed_over_the_threshold_only() -> None:
    codec = make_serializer("json", compress_over=100)
    small, large = {"a": "x" * 50}, {"a": "x" * 5000, "when": datetime.date(2026, 1, 1)}
    assert codec.dumps(small)[:1] == b"{"
    packed = codec.dumps(large)
    assert packed[:1] == b"z" and len(packed) < 200
    assert zlib.decompress(packed[1:])[:1] == b"~"
    assert codec.loads(packed) == large
    assert make_serializer("json").loads(packed) == large  # the reader needs no setting
    with pytest.raises(ValueError, match="serializer='json' only"):
        make_serializer("pickle", compress_over=100)
    with pytest.raises(ValueError, match="int >= 0"):
        make_serializer("json", compress_over=-1)


def test_every_caller_gets_the_form_other_readers_decode() -> None:
    msgpack = make_serializer("msgpack")
    value = {"t": (1, 2)}
    assert canonical(msgpack, value, msgpack.dumps(value)) == {"t": [1, 2]}
    exact = make_serializer("json")
    assert canonical(exact, value, exact.dumps(value)) is value  # it reads back as is


def test_the_stdlib_and_orjson_read_each_others_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    codec = make_serializer("json")
    values = [{"a": [1, 2.5, "é"]}, ROW, 10**30]
    written = [codec.dumps(value) for value in values]
    monkeypatch.setattr(_cache_json, "_orjson", None)
    assert [codec.loads(payload) for payload in written] == values
    assert [codec.dumps(value) for value in values[:1]] == written[:1]


class _Zone(datetime.tzinfo):
    def utcoffset(self, dt: datetime.datetime | None) -> datetime.timedelta:
        return datetime.timedelta(hours=1)

    def dst(self, dt: datetime.datetime | None) -> datetime.timedelta:
        return datetime.timedelta(0)

    def tzname(self, dt: datetime.datetime | None) -> str:
        return "+01"
