"""`--map TABLE=NAMESPACE[:COLUMN]`: which cache namespace a table's rows live in (pure).

`users=users` is the table `users` in the source's default schema (PostgreSQL: public;
MariaDB: the URL's database), cached in namespace "users" by its primary key;
`sales.orders=orders:order_no` is a qualified table cached by its `order_no` column.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from seawall.errors import SeawallError

__all__ = ["MapError", "TableMap", "parse_map", "parse_maps", "qualify"]

# A SQL identifier as users type them: letters, digits, _ and $, not starting with a digit.
_IDENT = r"[A-Za-z_][A-Za-z0-9_$]*"
_TABLE = re.compile(rf"^(?:({_IDENT})\.)?({_IDENT})$")
_COLUMN = re.compile(rf"^{_IDENT}$")

_FORM = "TABLE=NAMESPACE[:COLUMN], e.g. users=users or sales.orders=orders:order_no"


class MapError(SeawallError, ValueError):
    """A `--map` that cannot be parsed, or two maps for one table."""


@dataclass(frozen=True, slots=True)
class TableMap:
    """One table's rows cached in `namespace`, keyed by `column` (None: the primary key).

    `schema` is None when the user gave a bare table name: the source's default applies.
    """

    schema: str | None
    table: str
    namespace: str
    column: str | None = None

    def qualified(self, default_schema: str) -> str:
        return qualify(self.schema, self.table, default_schema)


def qualify(schema: str | None, table: str, default_schema: str) -> str:
    return f"{schema or default_schema}.{table}"


def parse_map(text: str) -> TableMap:
    """Parse one `--map` value; MapError names what is wrong and the expected form."""
    source, sep, target = text.partition("=")
    if not sep or not source.strip() or not target.strip():
        raise MapError(f"--map {text!r}: expected {_FORM}")
    found = _TABLE.match(source.strip())
    if found is None:
        raise MapError(
            f"--map {text!r}: {source.strip()!r} is not a table name (TABLE or SCHEMA.TABLE "
            "of letters, digits and _); quote nothing, case as stored in the database"
        )
    namespace, colon, column = target.strip().partition(":")
    if not namespace:
        raise MapError(f"--map {text!r}: the cache namespace is empty; expected {_FORM}")
    if colon and not _COLUMN.match(column):
        raise MapError(
            f"--map {text!r}: {column!r} is not a column name; expected {_FORM}, or leave "
            ":COLUMN out to key by the primary key"
        )
    return TableMap(found.group(1), found.group(2), namespace, column if colon else None)


def parse_maps(texts: Iterable[str], default_schema: str | None = None) -> list[TableMap]:
    """Parse every `--map`; at least one is needed. A table may feed several namespaces
    (a Cache and a QueryCache's row tokens), but one namespace once per table.

    With `default_schema`, a bare table and its qualified spelling count as one table.
    """
    maps = [parse_map(t) for t in texts]
    if not maps:
        raise MapError(f"no --map given: name at least one table to follow ({_FORM})")
    seen: set[tuple[str | None, str, str]] = set()
    for item in maps:
        key = (item.schema or default_schema, item.table, item.namespace)
        if key in seen:
            name = f"{item.schema}.{item.table}" if item.schema else item.table
            raise MapError(
                f"--map: table {name!r} is mapped to namespace {item.namespace!r} twice; "
                "keep one --map"
            )
        seen.add(key)
    return maps
