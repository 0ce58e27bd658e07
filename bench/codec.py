"""Cache payload codecs: encode + decode time and payload size, no Redis.

seawall's serializers (the default JSON read back exactly, see src/seawall/cache/_json.py,
with orjson as `seawall[fast]` installs it, with the stdlib alone and with compression;
msgpack and pickle on request) against the codecs of the other caches, each through the
library's own code, as its Redis backend stores a value:
- dogpile.cache's Redis backend: by default `pickle` of the value behind a JSON metadata
  header (CacheRegion._serialized_payload / _parse_serialized_from_backend); with the
  JSON option its documentation shows (`make_region(serializer=json.dumps...)`);
- cashews' Redis backend: its default serializer (pickle, then `repr()` of every value
  read, check_repr=True), and with `pickle_type="json"`;
- for reference: the stdlib json with `default=str`, lossy (a datetime comes back a
  str), and orjson's dumps/loads alone, the floor of any JSON codec built on it (it
  refuses Decimal; it writes a datetime, read back as a str).
Four values: a row of plain JSON types, 100 such rows, a row as a database driver returns
it (datetime, Decimal, UUID, date) and 100 of those. A codec that refuses a value (plain
JSON and msgpack refuse a datetime) shows "-". "exact" counts the values read back equal
to what was written.

A figure is the median over passes of the mean time of one encode + decode; codecs take
turns value by value (order reversed every pass); a ratio is the median of same-pass
ratios to seawall's default (JSON + orjson).

    PYTHONPATH=src .venv/bin/python bench/codec.py [--quick] [--passes 15] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import math
import sys
import time
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from _harness import (
    Column,
    Goal,
    Table,
    format_goals,
    format_table,
    machine_note,
    median,
    parse_args,
    write_json,
)

from seawall.cache import _json
from seawall.cache._codec import make_serializer

PLAIN = {"id": 7, "name": "Ada Lovelace", "email": "ada@example.com", "score": 91.5,
         "active": True, "roles": ["admin", "author"], "manager_id": None}  # fmt: skip
ROW = {"id": 7, "name": "Ada Lovelace", "price": Decimal("19.99"),
       "created": datetime.datetime(2026, 3, 1, 12, 30, 5, 123456, tzinfo=datetime.UTC),
       "born": datetime.date(1815, 12, 10), "ref": uuid.UUID(int=7), "active": True}  # fmt: skip

# name -> (value, encode+decode round trips per timed batch)
VALUES: dict[str, tuple[Any, int]] = {
    "plain": (PLAIN, 2000),
    "plain100": ([dict(PLAIN, id=i) for i in range(100)], 40),
    "row": (ROW, 500),
    "row100": ([dict(ROW, id=i) for i in range(100)], 10),
}

SEAWALL = "seawall json + orjson (default)"
COLUMNS = [
    Column("plain_us", "plain row us", ".2f"),
    Column("plain_x", "x seawall", ".2f"),
    Column("plain100_us", "100 plain rows us", ",.0f"),
    Column("plain100_x", "x seawall", ".2f"),
    Column("row_us", "db row us", ".2f"),
    Column("row_x", "x seawall", ".2f"),
    Column("row100_us", "100 db rows us", ",.0f"),
    Column("row100_x", "x seawall", ".2f"),
    Column("plain100_bytes", "bytes, 100 plain", ",.0f"),
    Column("row100_bytes", "bytes, 100 db rows", ",.0f"),
    Column("exact", "exact (of 4)", ".0f"),
]
HEADLINE = "plain100_us"
FIRST = "codec"
GOALS = [
    Goal("seawall's default reads back all 4 values exactly", SEAWALL, "exact", "==", 4.0),
    Goal(
        "seawall json + orjson <= stdlib-only seawall json, 100 plain rows",
        "seawall json, stdlib only",
        "plain100_x",
        ">=",
        1.0,
    ),
]

# encode, decode: plain functions, or coroutine functions (run in the benchmark's loop)
Codec = tuple[Callable[[Any], Any], Callable[[Any], Any]]


def seawall_codec(choice: str, *, orjson: bool = True, compress_over: int | None = None) -> Codec:
    serializer = make_serializer(choice, compress_over)
    if orjson:
        return serializer.dumps, serializer.loads
    saved = _json._orjson

    def dumps(value: Any) -> bytes:
        _json._orjson = None  # type: ignore[assignment]
        try:
            return serializer.dumps(value)
        finally:
            _json._orjson = saved

    def loads(data: bytes) -> Any:
        _json._orjson = None  # type: ignore[assignment]
        try:
            return serializer.loads(data)
        finally:
            _json._orjson = saved

    return dumps, loads


def dogpile_codec(json_option: bool) -> Codec:
    from dogpile.cache import make_region

    options: dict[str, Any] = {}
    if json_option:
        options = {"serializer": lambda v: json.dumps(v).encode("ascii"),
                   "deserializer": json.loads}  # fmt: skip
    # The Redis backend connects on its first command; none is sent here.
    region = make_region(**options).configure(
        "dogpile.cache.redis", expiration_time=300, arguments={"url": "redis://127.0.0.1:9/0"}
    )
    return (
        region._serialized_payload,
        lambda data: region._parse_serialized_from_backend(data).payload,
    )


def cashews_codec(pickle_type: str) -> Codec:
    from cashews.picklers import PicklerType
    from cashews.serialize import get_serializer

    serializer = get_serializer(pickle_type=PicklerType(pickle_type))  # as cache.setup() makes

    async def dumps(value: Any) -> Any:
        return await serializer.encode(None, key="k", value=value, expire=300)  # type: ignore[arg-type]

    async def loads(data: Any) -> Any:
        return await serializer.decode(None, key="k", value=data, default=None)  # type: ignore[arg-type]

    return dumps, loads


def lossy_json() -> Codec:
    return (lambda v: json.dumps(v, separators=(",", ":"), default=str).encode()), json.loads


def bare_orjson() -> Codec:
    import orjson

    return orjson.dumps, orjson.loads


def codecs() -> dict[str, Codec]:
    if _json._orjson is None:
        sys.exit("codec.py compares seawall with orjson: install the bench extra (dev.py bench)")
    return {
        SEAWALL: seawall_codec("json"),
        "seawall json, stdlib only": seawall_codec("json", orjson=False),
        "seawall json + orjson, compress_over=1024": seawall_codec("json", compress_over=1024),
        "seawall msgpack": seawall_codec("msgpack"),
        "seawall pickle": seawall_codec("pickle"),
        "dogpile.cache redis (pickle: its default)": dogpile_codec(json_option=False),
        "dogpile.cache redis, serializer=json.dumps": dogpile_codec(json_option=True),
        "cashews redis (pickle: its default)": cashews_codec("default"),
        "cashews redis, pickle_type=json": cashews_codec("json"),
        "stdlib json, default=str (lossy)": lossy_json(),
        "orjson dumps/loads alone (floor)": bare_orjson(),
    }


class Runner:
    """Calls a codec's functions, sync or async, and times batches of round trips."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def call(self, function: Callable[[Any], Any], arg: Any) -> Any:
        if asyncio.iscoroutinefunction(function):
            return self.loop.run_until_complete(function(arg))
        return function(arg)

    def batch(self, codec: Codec, value: Any, rounds: int) -> float:
        """Seconds per encode + decode, over `rounds` of them."""
        dumps, loads = codec
        if asyncio.iscoroutinefunction(dumps):

            async def timed() -> float:
                started = time.perf_counter()
                for _ in range(rounds):
                    await loads(await dumps(value))
                return time.perf_counter() - started

            return self.loop.run_until_complete(timed()) / rounds
        started = time.perf_counter()
        for _ in range(rounds):
            loads(dumps(value))
        return (time.perf_counter() - started) / rounds


def measure(passes: int, scale: float) -> Table:
    runner = Runner()
    contenders = codecs()
    table: Table = {name: {"exact": 0.0} for name in contenders}
    usable: dict[str, list[str]] = {}  # value -> the codecs that take it
    for value_name, (value, _) in VALUES.items():
        usable[value_name] = []
        for name, codec in contenders.items():
            try:
                payload = runner.call(codec[0], value)
                back = runner.call(codec[1], payload)
            except (TypeError, ValueError) as exc:
                print(f"  {name} refuses the {value_name} value: {type(exc).__name__}")
                table[name][f"{value_name}_us"] = math.nan
                continue
            usable[value_name].append(name)
            table[name]["exact"] += back == value
            if value_name.endswith("100"):
                table[name][f"{value_name}_bytes"] = float(len(payload))
    times: dict[tuple[str, str], list[float]] = {}
    ratios: dict[tuple[str, str], list[float]] = {}
    for number in range(passes):
        for value_name, (value, rounds) in VALUES.items():
            names = usable[value_name] if number % 2 == 0 else usable[value_name][::-1]
            took = {
                name: runner.batch(contenders[name], value, max(1, int(rounds * scale)))
                for name in names
            }
            for name, seconds in took.items():
                times.setdefault((name, value_name), []).append(seconds * 1e6)
                ratios.setdefault((name, value_name), []).append(seconds / took[SEAWALL])
        print(f"  pass {number + 1}/{passes} done", flush=True)
    for (name, value_name), samples in times.items():
        table[name][f"{value_name}_us"] = median(samples)
        table[name][f"{value_name}_x"] = median(ratios[(name, value_name)])
    runner.loop.close()
    return table


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--passes", type=int, default=15)


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], _arguments)
    passes, scale = (3, 0.25) if args.quick else (args.passes, 1.0)
    print(f"codec: {machine_note()}; {passes} passes")
    table = measure(passes, scale)
    print()
    print(format_table(COLUMNS, table, first=FIRST))
    print("\nx seawall: time / seawall json + orjson's time in the same pass (median)")
    print("\nGoals:\n" + format_goals(GOALS, table))
    write_json(args.json, "codec", table, {"passes": passes, "scale": scale})


if __name__ == "__main__":
    main()
