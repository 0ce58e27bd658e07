"""The default serializer reads back exactly what it was given, or refuses it."""

from __future__ import annotations

import datetime
import enum
import json
import pickle
import subprocess
import sys
import uuid
import zlib
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from seawall.cache import _json
from seawall.cache._codec import canonical, encode, make_serializer
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
    monkeypatch.setattr(_json, "_orjson", None)
    assert [codec.loads(payload) for payload in written] == values
    assert [codec.dumps(value) for value in values[:1]] == written[:1]


class _Zone(datetime.tzinfo):
    def utcoffset(self, dt: datetime.datetime | None) -> datetime.timedelta:
        return datetime.timedelta(hours=1)

    def dst(self, dt: datetime.datetime | None) -> datetime.timedelta:
        return datetime.timedelta(0)

    def tzname(self, dt: datetime.datetime | None) -> str:
        return "+01"


# Payloads written by seawall before the codec's checks were sped up (commit da856e8), the
# same with and without orjson: still read as these values, and written byte for byte again.
EARLIER_PAYLOADS: list[tuple[Any, bytes]] = [
    (
        {"id": 7, "name": "Ada", "score": 91.5, "ok": True, "none": None, "roles": ["a", "é"]},
        b'{"id":7,"name":"Ada","score":91.5,"ok":true,"none":null,"roles":["a","\xc3\xa9"]}',
    ),
    (
        [
            2**63 - 1,
            2**63,
            2**64 - 1,
            2**64,
            -(2**63),
            -(2**63) - 1,
            10**30,
            -(10**30),
            1234567890123456789,
        ],
        b"[9223372036854775807,9223372036854775808,18446744073709551615,18446744073709551616,"
        b"-9223372036854775808,-9223372036854775809,1000000000000000000000000000000,"
        b"-1000000000000000000000000000000,1234567890123456789]",
    ),
    (
        {"phone": "123456789012345678901234", "neg": "-1234567890123456789"},
        b'{"phone":"123456789012345678901234","neg":"-1234567890123456789"}',
    ),
    (
        {
            "id": 7,
            "price": Decimal("19.990"),
            "ref": uuid.UUID(int=7),
            "t": (1, 2),
            1: "one",
            "~": [float("inf")],
        },
        b'~{"~":["d",[["id",7],["price",{"~":["dec","19.990"]}],["ref",{"~":["uuid",'
        b'"00000000-0000-0000-0000-000000000007"]}],["t",{"~":["t",[1,2]]}],[1,"one"],'
        b'["~",[{"~":["f","inf"]}]]]]}',
    ),
]


@pytest.fixture(params=["orjson", "stdlib"])
def parser(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs a test with orjson (installed with the dev extra) and with the stdlib alone."""
    assert _json._orjson is not None, "the dev extra installs orjson"
    if request.param == "stdlib":
        monkeypatch.setattr(_json, "_orjson", None)
    return str(request.param)


def assert_same(back: Any, value: Any, where: str = "value") -> None:
    """`back` equals `value` with the same type at every level (== alone takes True for 1,
    {1.0: x} for {1: x}, an IntEnum for its int)."""
    assert type(back) is type(value), f"{where}: {type(back)} is not {type(value)}"
    if isinstance(value, dict):
        assert list(back) == list(value), where
        for (key, item), (back_key, back_item) in zip(value.items(), back.items(), strict=True):
            assert_same(back_key, key, f"{where} key {key!r}")
            assert_same(back_item, item, f"{where}[{key!r}]")
    elif isinstance(value, list | tuple):
        assert len(back) == len(value), where
        for number, (item, back_item) in enumerate(zip(value, back, strict=True)):
            assert_same(back_item, item, f"{where}[{number}]")
    elif isinstance(value, float) and value != value:
        assert back != back, where
    else:
        assert back == value, where


def test_payloads_of_the_earlier_codec_are_read_and_written_the_same(parser: str) -> None:
    codec = make_serializer("json")
    for value, payload in EARLIER_PAYLOADS:
        assert_same(codec.loads(payload), value)
        assert codec.dumps(value) == payload, parser


def test_integers_beyond_64_bits_come_back_exact_next_to_anything(parser: str) -> None:
    codec = make_serializer("json")
    edges = [2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 10**19, -(10**19)]
    edges += [10**18, -(10**18), 10**40, -(10**40), 1234567890123456789]
    values: list[Any] = [*edges, edges, {"n": edges, "s": "x" * 30}]
    values += [{"id": number, "name": "Ada"} for number in edges]
    values += [["12345678901234567890", 1.5e300, -1.5e-300, 2**64], {"x": [[2**64 + 1]]}]
    for value in values:
        payload = codec.dumps(value)
        assert payload[:1] != b"~", value  # plain JSON holds any int
        assert_same(codec.loads(payload), value)
    if parser == "orjson":  # what the digit check exists for: orjson alone reads a float
        assert type(_json._orjson.loads(codec.dumps(2**64))) is float
        assert type(_json._orjson.loads(codec.dumps(-(2**63) - 1))) is float


class Level(enum.IntEnum):
    LOW = 1


class Label(str):
    pass


def test_what_plain_json_cannot_hold_is_tagged_wherever_it_sits(parser: str) -> None:
    codec = make_serializer("json")
    odd: list[Any] = [(1, 2), float("nan"), float("inf"), float("-inf"), {1: "one"},
                      {"~": "only key"}, b"\x00", uuid.UUID(int=1), Decimal("1.50"), {3},
                      datetime.date(2026, 1, 2), (), {(1, 2): [3]}, {True: 1}]  # fmt: skip
    for item in odd:
        for value in [item, [1, "a", item], {"a": 1, "b": item}, [{"a": [2.5, {"b": item}]}]]:
            payload = codec.dumps(value)
            assert payload[:1] == b"~", value
            assert_same(codec.loads(payload), value)
    for plain in [[], {}, [[[]]], {"~": 1, "a": 2}, [-0.0, 1e-300, 0.1], [True, 1, 1.0, None]]:
        payload = codec.dumps(plain)
        assert payload[:1] in (b"[", b"{"), plain
        assert_same(codec.loads(payload), plain)
    for bad in [Level.LOW, Label("x"), {"a": [Level.LOW]}, [{"k": Label("v")}], {Label("k"): 1}]:
        with pytest.raises(CacheSerializationError, match="json serializer"):
            encode(codec, bad, "n", "k")


def test_a_process_without_orjson_reads_and_writes_the_same_bytes() -> None:
    """Payloads cross between a process with orjson and one where it cannot be imported."""
    codec = make_serializer("json")
    values: list[Any] = [value for value, _ in EARLIER_PAYLOADS]
    values += [ROW, [2**64, -(2**63) - 1, "1" * 40], {"x": [[{"y": (1, 2)}]]}, float("nan")]
    script = (
        "import pickle, sys\n"
        "sys.modules['orjson'] = None  # import orjson raises ImportError\n"
        "from seawall.cache import _json\n"
        "from seawall.cache._codec import make_serializer\n"
        "assert _json._orjson is None\n"
        "codec = make_serializer('json')\n"
        "values = [codec.loads(p) for p in pickle.load(sys.stdin.buffer)]\n"
        "pickle.dump((values, [codec.dumps(v) for v in values]), sys.stdout.buffer)\n"
    )
    written = [codec.dumps(value) for value in values]
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=pickle.dumps(written),
        capture_output=True,
        check=True,
        timeout=60,
    )
    read_there, written_there = pickle.loads(done.stdout)
    for value, back, payload in zip(values, read_there, written_there, strict=True):
        assert_same(back, value)
        assert_same(codec.loads(payload), value)  # read here, with orjson
