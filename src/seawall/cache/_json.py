"""The default cache codec: JSON that gives back exactly what was stored. No I/O.

Plain JSON turns `{1: "one"}` into `{"1": "one"}` and tuples into lists, and refuses the
types a database row carries. This codec writes a value that JSON holds exactly (str keys,
lists, str, int, finite float, bool, None) as plain JSON, byte for byte what seawall wrote
before; anything else is written as JSON with tags, prefixed "~" (no JSON text starts
with it):

    {"~": [tag, data]}    tag: "t" tuple, "d" dict as [[key, value], ...] (non-str keys,
                          or a dict whose only key is "~"), "s" set, "fs" frozenset,
                          "dt" datetime (ISO 8601), "dz" datetime with a ZoneInfo
                          ([ISO 8601, zone key]), "date", "time", "dec" Decimal (its str),
                          "uuid", "b" bytes (base64), "f" nan/inf/-inf

and read back to the same types and values. A type outside this list (a dataclass, an
Enum, a str or int subclass, a datetime with another kind of tzinfo) is refused when
written rather than read back as something else. With `compress_over`, payloads larger
than that many bytes are zlib-compressed and prefixed "z" (binary: not for clients made
with decode_responses=True).

orjson, when installed (`seawall[fast]`), encodes and parses the JSON; the bytes it writes
are read by the stdlib json and the other way round, so processes with and without it
share a cache.

Compatibility: a payload without a prefix is plain JSON, as seawall always wrote. A
process of an older seawall reading a "~" or "z" payload fails to parse it and treats it as
a miss (it logs it and loads the value again); it never reads it as something else.
"""

from __future__ import annotations

import base64
import datetime
import json
import math
import uuid
import zlib
from typing import Any

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - the stdlib serves
    _orjson = None  # type: ignore[assignment]

TAGGED = b"~"
COMPRESSED = b"z"
TAG = "~"

# orjson reads an integer outside [-2**63, 2**64 - 1] as a float. Such an integer is a run
# of 20 digits or more, or of 19 after a minus sign: _DIGITS maps every digit to "0" and
# "-" to itself, everything else to " ", so a bytes search finds such runs (in a number or
# a str: either way the stdlib reads the payload, exactly).
_DIGITS = bytes(48 if 48 <= byte <= 57 else byte if byte == 45 else 32 for byte in range(256))
_LONG_INT = b"0" * 20
_LONG_NEGATIVE_INT = b"-" + b"0" * 19

# Types written as themselves; everything else needs a tag or is refused.
_SCALARS = frozenset({str, int, bool, type(None)})
_finite = math.isfinite


def _plain(value: Any) -> bool:
    """Whether plain JSON holds `value` exactly (so it is written without tags).

    It visits every item of a large value, so it stays cheap per item: scalars are checked
    in the loop, only lists and dicts cost a call (twice the speed of a call per item)."""
    kind = type(value)
    if kind is dict:
        if len(value) == 1 and TAG in value:
            return False
        for key, item in value.items():
            if type(key) is not str:
                return False
            kind = type(item)
            if kind in _SCALARS or (kind is float and _finite(item)):
                continue
            if (kind is list or kind is dict) and _plain(item):
                continue
            return False
        return True
    if kind is list:
        for item in value:
            kind = type(item)
            if kind in _SCALARS or (kind is float and _finite(item)):
                continue
            if (kind is list or kind is dict) and _plain(item):
                continue
            return False
        return True
    return kind in _SCALARS or (kind is float and _finite(value))


def _tagged(value: Any) -> Any:
    """`value` as a JSON tree, with tags for what JSON does not hold exactly."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is float:
        return value if math.isfinite(value) else {TAG: ["f", repr(value)]}
    if kind is list:
        return [_tagged(item) for item in value]
    if kind is dict:
        if all(type(key) is str for key in value) and not (len(value) == 1 and TAG in value):
            return {key: _tagged(item) for key, item in value.items()}
        return {TAG: ["d", [[_tagged(key), _tagged(item)] for key, item in value.items()]]}
    if kind is tuple:
        return {TAG: ["t", [_tagged(item) for item in value]]}
    if kind is datetime.datetime:
        zone = value.tzinfo
        if zone is None or type(zone) is datetime.timezone:
            return {TAG: ["dt", value.isoformat()]}
        if _is(type(zone), "zoneinfo", "ZoneInfo") and getattr(zone, "key", None):
            return {TAG: ["dz", [value.isoformat(), zone.key]]}
        raise TypeError(
            f"a datetime with tzinfo {zone!r} cannot be read back exactly; use a "
            "zoneinfo.ZoneInfo or datetime.timezone, or convert it to UTC"
        )
    if kind is datetime.date:
        return {TAG: ["date", value.isoformat()]}
    if kind is datetime.time:
        if value.tzinfo is not None and type(value.tzinfo) is not datetime.timezone:
            raise TypeError(f"a time with tzinfo {value.tzinfo!r} cannot be read back exactly")
        return {TAG: ["time", value.isoformat()]}
    if _is(kind, "decimal", "Decimal"):
        return {TAG: ["dec", str(value)]}
    if kind is uuid.UUID:
        return {TAG: ["uuid", str(value)]}
    if kind is bytes:
        return {TAG: ["b", base64.b64encode(value).decode()]}
    if kind is set or kind is frozenset:
        return {TAG: ["s" if kind is set else "fs", [_tagged(item) for item in value]]}
    raise TypeError(
        f"{kind.__qualname__} is not one of the types the json serializer reads back "
        "exactly (str, int, float, bool, None, list, tuple, dict, set, frozenset, datetime, "
        "date, time, Decimal, UUID, bytes)"
    )


def _is(kind: type, module: str, name: str) -> bool:
    """`kind` is module.name itself (not a subclass), without importing the module: decimal
    and zoneinfo are loaded only once such a value is read, keeping `import seawall` light."""
    return kind.__name__ == name and kind.__module__ == module


def _untag(tag: str, data: Any) -> Any:
    if tag == "t":
        return tuple(data)
    if tag == "d":
        return dict(data)
    if tag == "dt":
        return datetime.datetime.fromisoformat(data)
    if tag == "dz":
        from zoneinfo import ZoneInfo

        return datetime.datetime.fromisoformat(data[0]).replace(tzinfo=ZoneInfo(data[1]))
    if tag == "date":
        return datetime.date.fromisoformat(data)
    if tag == "time":
        return datetime.time.fromisoformat(data)
    if tag == "dec":
        from decimal import Decimal

        return Decimal(data)
    if tag == "uuid":
        return uuid.UUID(data)
    if tag == "b":
        return base64.b64decode(data, validate=True)
    if tag == "s":
        return set(data)
    if tag == "fs":
        return frozenset(data)
    if tag == "f":
        return float(data)
    raise ValueError(f"unknown tag {tag!r}: written by a newer seawall?")


def _hook(obj: dict[str, Any]) -> Any:
    if len(obj) == 1 and TAG in obj:
        tag, data = obj[TAG]
        return _untag(tag, data)
    return obj


def _dumps(tree: Any) -> bytes:
    if _orjson is not None:
        try:
            return _orjson.dumps(tree)
        except TypeError:  # an int beyond 64 bits: the stdlib writes it
            pass
    return json.dumps(tree, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def _loads(data: bytes) -> Any:
    if _orjson is not None:
        digits = data.translate(_DIGITS)
        if _LONG_INT not in digits and _LONG_NEGATIVE_INT not in digits:
            return _orjson.loads(data)
    return json.loads(data)


class JsonSerializer:
    """The default serializer: JSON, with tags for what JSON does not hold exactly."""

    name = "json"
    # What loads() returns equals what dumps() was given (or dumps() refused it): a
    # loading caller may keep its own object rather than decode the payload it wrote.
    exact = True

    def __init__(self, compress_over: int | None = None) -> None:
        self.compress_over = compress_over

    def dumps(self, value: Any) -> bytes:
        data = _dumps(value) if _plain(value) else TAGGED + _dumps(_tagged(value))
        limit = self.compress_over
        if limit is not None and len(data) > limit:
            return COMPRESSED + zlib.compress(data, 1)
        return data

    def loads(self, data: bytes) -> Any:
        if data[:1] == COMPRESSED:
            data = zlib.decompress(data[1:])
        if data[:1] == TAGGED:
            return json.loads(data[1:], object_hook=_hook)
        return _loads(data)
