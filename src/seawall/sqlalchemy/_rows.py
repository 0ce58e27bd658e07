"""Results as plain data and back: what a cached query stores in Redis. No I/O.

A payload is JSON-ready (lists, strings, numbers, None and tagged dicts):

    {"keys": [...], "objs": [[class, {column: value}, {relationship: ref}, plain], ...],
     "rows": [[cell, ...], ...]}

A mapped instance is stored once in "objs" and referenced by {"o": index}, so loaded
relationships may point back and forth (user.addresses[0].user is user). Only attributes
that were loaded are stored: deferred columns and relationships not loaded stay unloaded
on the rebuilt instance and load on access as usual.
"""

from __future__ import annotations

import copy
import datetime
import decimal
import enum
import sys
import uuid
import zoneinfo
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import inspect
from sqlalchemy.orm import Mapper
from sqlalchemy.orm.attributes import set_committed_value
from sqlalchemy.orm.base import instance_state

from seawall.errors import CacheSerializationError
from seawall.sqlalchemy._tables import relationship_tables

_PLAIN = (str, int, float, bool, type(None))
_PLAIN_TYPES = frozenset(_PLAIN)  # exact types: a str or int subclass (an Enum) is tagged

# Tags of values JSON has no type for: tag -> (type, to text, from text).
_TAGGED: dict[str, tuple[type, Callable[[Any], Any], Callable[[Any], Any]]] = {
    "dt": (datetime.datetime, datetime.datetime.isoformat, datetime.datetime.fromisoformat),
    "d": (datetime.date, datetime.date.isoformat, datetime.date.fromisoformat),
    "t": (datetime.time, datetime.time.isoformat, datetime.time.fromisoformat),
    "td": (
        datetime.timedelta,
        datetime.timedelta.total_seconds,
        lambda s: datetime.timedelta(seconds=s),
    ),
    "n": (decimal.Decimal, str, decimal.Decimal),
    "u": (uuid.UUID, str, uuid.UUID),
    "b": (bytes, bytes.hex, bytes.fromhex),
}
_BY_TYPE = {kind: tag for tag, (kind, _, _) in _TAGGED.items()}


def encode_value(value: Any, where: str) -> Any:
    if type(value) in _PLAIN_TYPES:
        return value
    if type(value) is datetime.datetime and isinstance(value.tzinfo, zoneinfo.ZoneInfo):
        # a named zone, not only its offset: arithmetic across DST needs it
        return {"dz": [value.isoformat(), value.tzinfo.key]}
    tag = _BY_TYPE.get(type(value))
    if tag is not None:
        return {tag: _TAGGED[tag][1](value)}
    if isinstance(value, memoryview | bytearray):
        return {"b": bytes(value).hex()}
    if isinstance(value, enum.Enum):
        kind = type(value)
        return {"e": [kind.__module__, kind.__qualname__, value.name]}
    if isinstance(value, dict | list):  # a JSON column: wrapped so no tag is mistaken
        return {"j": _json_copy(value)}
    raise CacheSerializationError(
        f"{where}: a value of type {type(value).__qualname__} cannot be cached as plain data "
        "(supported: str, int, float, bool, None, datetime, date, time, timedelta, Decimal, "
        "UUID, bytes, Enum members, JSON dicts and lists). Select the column converted (e.g. "
        "cast(col, String)), or drop cached() from this statement"
    )


def _json_copy(value: Any) -> Any:
    """A JSON value as plain dicts and lists, copied: the stored payload (which the L1
    keeps as it is) never shares a dict with the loading session's instance, whose
    in-place changes would otherwise reach it, and a MutableDict is stored as the dict it
    holds (the `load` event wraps it again)."""
    if isinstance(value, dict):
        return {key: _json_copy(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_copy(item) for item in value]
    return value


def decode_value(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    ((tag, text),) = value.items()
    if tag == "j":  # a copy: the L1 keeps the decoded payload, and JSON values are mutable
        return copy.deepcopy(text)
    if tag == "dz":
        stamp, zone = text
        return datetime.datetime.fromisoformat(stamp).astimezone(zoneinfo.ZoneInfo(zone))
    if tag == "e":
        return _enum_member(*text)
    return _TAGGED[tag][2](text)


def _enum_member(module: str, qualname: str, name: str) -> Any:
    """An Enum member by its class's import path; only Enum classes are looked up, and
    only in modules this process has already imported (nothing is imported from Redis)."""
    found: Any = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    if not (isinstance(found, type) and issubclass(found, enum.Enum)):
        raise LookupError(f"enum {module}.{qualname} is not loaded in this process")
    return found[name]


class _Encoder:
    def __init__(self, covered: frozenset[str]) -> None:
        self.objs: list[Any] = []
        self.index: dict[int, int] = {}
        self.covered = covered

    def cell(self, value: Any, where: str) -> Any:
        mapper = _mapper_of(value)
        if mapper is None:
            return encode_value(value, where)
        return {"o": self.entity(value, mapper)}

    def entity(self, obj: Any, mapper: Mapper[Any]) -> int:
        found = self.index.get(id(obj))
        if found is not None:
            return found
        slot = len(self.objs)
        self.index[id(obj)] = slot
        # [class, {column: value}, {relationship: ref}, 1 when no value is tagged]
        record: list[Any] = [_class_name(mapper), {}, {}, 1]
        self.objs.append(record)
        loaded = instance_state(obj).dict
        for attr in mapper.column_attrs:
            if attr.key in loaded:
                where = f"column {mapper.class_.__name__}.{attr.key}"
                value = record[1][attr.key] = encode_value(loaded[attr.key], where)
                if type(value) is dict:
                    record[3] = 0
        for rel in mapper.relationships:
            if rel.key not in loaded or not relationship_tables(rel) <= self.covered:
                continue  # not loaded, or loaded from tables whose writes the key misses
            target = loaded[rel.key]
            if target is None:
                record[2][rel.key] = None
            elif rel.uselist:
                record[2][rel.key] = [self.entity(item, inspect(item).mapper) for item in target]
            else:
                record[2][rel.key] = self.entity(target, inspect(target).mapper)
        return slot


def _mapper_of(value: Any) -> Mapper[Any] | None:
    if isinstance(value, _PLAIN):
        return None
    found = inspect(value, raiseerr=False)
    mapper = getattr(found, "mapper", None)
    return mapper if isinstance(mapper, Mapper) and found is not mapper else None


def _class_name(mapper: Mapper[Any]) -> str:
    return f"{mapper.class_.__module__}.{mapper.class_.__qualname__}"


def encode_result(
    keys: Sequence[str | None],
    rows: Sequence[Sequence[Any]],
    statement: str,
    covered: frozenset[str],
) -> Any:
    """The plain-data payload of a result's rows (raises CacheSerializationError).
    Relationships are stored only if every table they load from is in `covered` (the
    tables whose tokens the key folds in); the others load on access, as usual."""
    encoder = _Encoder(covered)
    out_rows = [
        [
            encoder.cell(cell, f"{statement}, result column {keys[i]!r}")
            for i, cell in enumerate(row)
        ]
        for row in rows
    ]
    return {"keys": list(keys), "objs": encoder.objs, "rows": out_rows}


def decode_result(
    payload: Any, mappers: dict[str, Mapper[Any]], existing: Callable[[Any], Any]
) -> tuple[list[str], list[list[Any]], list[Any]]:
    """Keys, rows, and the states of the instances built here.

    An instance whose identity `existing(identity_key)` returns is used as it is, as a
    query does with rows already in the session. Others are built with their identity
    key and loaded values (no attribute events, no history: as the ORM's loader does),
    their missing columns expired so they load on access; the caller attaches them.
    """
    objs: list[Any] = []
    built: list[Any] = []
    finish: list[tuple[Any, dict[str, Any], dict[str, Any]]] = []
    for class_name, columns, rels, plain in payload["objs"]:
        mapper = mappers.get(class_name)
        if mapper is None:
            raise LookupError(f"class {class_name} is not mapped in this process")
        pk_keys, every = _keys_of(mapper)
        if plain:
            pk = tuple([columns[key] for key in pk_keys])
        else:
            pk = tuple([decode_value(columns[key]) for key in pk_keys])
        identity = (mapper._identity_class, pk, None)  # identity_key_from_primary_key()
        found = existing(identity)
        if found is not None:
            objs.append(found)
            continue
        obj = mapper.class_manager.new_instance()
        state = instance_state(obj)
        if plain:  # the common case: every value as JSON gave it
            state.dict.update(columns)
        else:
            state.dict.update(
                {
                    key: decode_value(value) if type(value) is dict else value
                    for key, value in columns.items()
                }
            )
        state.key = identity
        objs.append(obj)
        built.append(state)
        if rels or len(columns) < len(every):
            finish.append((state, columns, rels))
    # Relationships point at objects anywhere in the payload: set once all are built.
    for state, columns, rels in finish:
        obj = state.obj()
        for key, ref in rels.items():
            if ref is None:
                set_committed_value(obj, key, None)
            elif isinstance(ref, list):
                set_committed_value(obj, key, [objs[i] for i in ref])
            else:
                set_committed_value(obj, key, objs[ref])
        every = _keys_of(state.mapper)[1]
        if len(columns) < len(every):  # deferred columns: expired, so they load on access
            state._expire_attributes(state.dict, [key for key in every if key not in columns])
    rows = [
        [
            objs[cell["o"]] if isinstance(cell, dict) and "o" in cell else decode_value(cell)
            for cell in row
        ]
        for row in payload["rows"]
    ]
    return payload["keys"], rows, built


_KEYS: dict[Mapper[Any], tuple[tuple[str, ...], tuple[str, ...]]] = {}


def _keys_of(mapper: Mapper[Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the primary key's attribute keys, every column attribute's key) of `mapper`."""
    found = _KEYS.get(mapper)
    if found is None:
        pk = tuple(mapper.get_property_by_column(c).key for c in mapper.primary_key)
        found = _KEYS[mapper] = (pk, tuple(attr.key for attr in mapper.column_attrs))
    return found
