"""Cache payload codecs: encode + decode time and payload size, no Redis.

seawall's default serializer (JSON read back exactly, see src/seawall/_cache_json.py) with
orjson (`seawall[fast]`) and with the stdlib alone, against the plain stdlib json that
seawall used before (lossy: tuples become lists, keys str, no datetime/Decimal/UUID), and
pickle, the default of dogpile.cache's Redis backend and of cashews. Three values: a row of
plain types, a row as a database driver returns it (datetime, Decimal, UUID, date), and
100 such rows. A figure is the median over passes of the mean time per encode + decode.

    PYTHONPATH=src .venv/bin/python bench/codec.py [--passes N]
"""

from __future__ import annotations

import argparse
import datetime
import json
import pickle
import statistics
import time
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from seawall import _cache_json
from seawall._cache_json import JsonSerializer

PLAIN = {"id": 7, "name": "Ada Lovelace", "email": "ada@example.com", "score": 91.5,
         "active": True, "roles": ["admin", "author"], "manager_id": None}
ROW = {"id": 7, "name": "Ada Lovelace", "price": Decimal("19.99"),
       "created": datetime.datetime(2026, 3, 1, 12, 30, 5, 123456, tzinfo=datetime.UTC),
       "born": datetime.date(1815, 12, 10), "ref": uuid.UUID(int=7), "active": True}
ROWS = [dict(ROW, id=i) for i in range(100)]


def stdlib_json() -> tuple[Callable[[Any], bytes], Callable[[bytes], Any]]:
    def dumps(value: Any) -> bytes:
        return json.dumps(value, separators=(",", ":"), default=str).encode()

    return dumps, json.loads


def exact(with_orjson: bool) -> tuple[Callable[[Any], bytes], Callable[[bytes], Any]]:
    codec = JsonSerializer()
    saved = _cache_json._orjson

    def dumps(value: Any) -> bytes:
        _cache_json._orjson = saved if with_orjson else None
        return codec.dumps(value)

    def loads(data: bytes) -> Any:
        _cache_json._orjson = saved if with_orjson else None
        return codec.loads(data)

    return dumps, loads


def pickled() -> tuple[Callable[[Any], bytes], Callable[[bytes], Any]]:
    return (lambda value: pickle.dumps(value, pickle.HIGHEST_PROTOCOL)), pickle.loads


def timed(codec: tuple[Callable[[Any], bytes], Callable[[bytes], Any]], value: Any,
          rounds: int) -> float:
    dumps, loads = codec
    started = time.perf_counter()
    for _ in range(rounds):
        loads(dumps(value))
    return (time.perf_counter() - started) / rounds * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--passes", type=int, default=5)
    args = parser.parse_args()
    codecs = {
        "seawall json + orjson": exact(True),
        "seawall json, stdlib": exact(False),
        "stdlib json (lossy)": stdlib_json(),
        "pickle (dogpile, cashews)": pickled(),
    }
    if _cache_json._orjson is None:
        del codecs["seawall json + orjson"]
    values = {"plain row": (PLAIN, 20000), "db row": (ROW, 10000), "100 db rows": (ROWS, 200)}
    print(f"{'codec':28}" + "".join(f"{name:>22}" for name in values))
    for name, codec in codecs.items():
        cells = []
        for value, rounds in values.values():
            micros = statistics.median(timed(codec, value, rounds) for _ in range(args.passes))
            size = len(codec[0](value))
            cells.append(f"{micros:9.2f} us {size:6d} B")
        print(f"{name:28}" + "".join(f"{cell:>22}" for cell in cells))


if __name__ == "__main__":
    main()
