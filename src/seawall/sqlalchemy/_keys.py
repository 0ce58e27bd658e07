"""How a cached statement is named in Redis. Pure: no I/O, no session.

A cached result's key folds in, in order: the statement's fingerprint (its SQL text, its
structure including loader options, its parameter values) and the current version token of
every table its result could include. A commit that writes a table replaces that table's
token, so every key built afterwards differs from every key built before: invalidation is
one write per table, whatever the number of cached results.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# Per-process memo of a statement structure's normalized text (the structure is hashable and
# SQLAlchemy reuses it for every execution of the same statement shape).
STRUCTURE_MEMO_SIZE = 2000

_ATOMS = (str, int, float, bool, type(None))


def normalize(structure: Any) -> str:
    """A text of a SQLAlchemy cache-key structure that is the same in every process.

    The structure holds tables, mappers, classes and functions; their default reprs carry
    memory addresses, which differ between processes. Each is replaced by its name.
    """
    parts: list[str] = []
    _walk(structure, parts)
    return "".join(parts)


def _walk(node: Any, out: list[str]) -> None:
    if isinstance(node, tuple | list):
        out.append("(")
        for item in node:
            _walk(item, out)
            out.append(",")
        out.append(")")
    elif isinstance(node, enum.Enum):
        out.append(f"{type(node).__qualname__}.{node.name}")
    elif isinstance(node, _ATOMS):
        out.append(repr(node))
    elif isinstance(node, type):
        out.append(f"{node.__module__}.{node.__qualname__}")
    else:
        out.append(_name_of(node))


def _name_of(node: Any) -> str:
    fullname = getattr(node, "fullname", None)  # Table, TableClause
    if isinstance(fullname, str):
        return f"T:{fullname}"
    class_ = getattr(node, "class_", None)  # Mapper
    if isinstance(class_, type):
        return f"M:{class_.__module__}.{class_.__qualname__}"
    name = getattr(node, "__qualname__", None) or getattr(node, "__name__", None)
    if isinstance(name, str):  # functions such as operator.eq
        return f"F:{name}"
    text = str(node)
    # A default repr names a memory address: the type is then all that is stable.
    return type(node).__qualname__ if " at 0x" in text else f"{type(node).__qualname__}:{text}"


def param_values(
    bind_keys: Sequence[tuple[str, Any]], parameters: Mapping[str, Any] | None
) -> tuple[Any, ...]:
    """The values a statement runs with: those passed at execution win over the literal
    values bound in the statement (session.get passes its primary key that way)."""
    given = parameters or {}
    return tuple(given.get(key, value) for key, value in bind_keys)


# Execution options that change how rows are fetched or what locks are taken, never which
# rows or values come back (isolation is handled apart: it decides whether to cache).
FETCH_OPTIONS = frozenset(
    {
        "autoflush",
        "compiled_cache",
        "isolation_level",
        "logging_token",
        "max_row_buffer",
        "populate_existing",
        "postgresql_readonly",
        "postgresql_deferrable",
        # AsyncSession.execute() sets it (rows read before leaving the greenlet), a
        # statement run in AsyncSession.run_sync() does not: the same rows either way
        "prebuffer_rows",
        "preserve_rowcount",
        "stream_results",
        "yield_per",
    }
)


def context_text(database: str, options: Mapping[str, Any]) -> str | None:
    """A text of what decides a statement's rows besides the statement: the database
    and every execution option but those of FETCH_OPTIONS and SQLAlchemy's private ones
    ("_"...). None when an option's value is not plain data (nothing else is stable
    across processes, nor tells two values apart)."""
    parts = [database]
    for name in sorted(options):
        if name.startswith("_") or name in FETCH_OPTIONS:
            continue
        given = options[name]
        if name == "schema_translate_map" and isinstance(given, Mapping):
            # SQLAlchemy adds "_none" for the None key to a map once it has used it
            given = {"_none" if key is None else key: item for key, item in given.items()}
        value = _plain(given)
        if value is None:
            return None
        parts.append(f"{name}={value}")
    return "\0".join(parts)


def _plain(value: Any) -> str | None:
    if type(value) in _ATOMS:
        return repr(value)
    if isinstance(value, Mapping):
        items = [(_plain(key), _plain(item)) for key, item in value.items()]
        if any(key is None or item is None for key, item in items):
            return None
        return "{" + ",".join(f"{key}:{item}" for key, item in sorted(items)) + "}"
    if isinstance(value, tuple | list | frozenset | set):
        parts = [_plain(item) for item in value]
        if None in parts:
            return None
        texts = [part or "" for part in parts]
        return "[" + ",".join(sorted(texts) if isinstance(value, frozenset | set) else texts) + "]"
    return None


def fingerprint(
    sql_text: str, structure_text: str, params: Iterable[Any], context: str = ""
) -> str:
    """A digest naming one statement run with one set of parameter values in one
    context (see context_text)."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(context.encode())
    digest.update(b"\0")
    digest.update(sql_text.encode())
    digest.update(b"\0")
    digest.update(structure_text.encode())
    digest.update(b"\0")
    digest.update(repr(tuple(params)).encode())
    return digest.hexdigest()


def entry_key(kind: str, statement_digest: str, versions: Iterable[str]) -> str:
    """The cache key of a result: `kind` ("q" a query, "g" a get), the statement's digest
    and the version tokens it was read under, in a fixed table order."""
    return f"{kind}:{statement_digest}:{'.'.join(versions)}"


def table_version_key(table_name: str) -> str:
    """The key of a table's version token in the tables namespace (schema-qualified)."""
    return table_name


def row_key(primary_key: Sequence[Any]) -> str:
    """A row's key as `seawall follow` writes it: composite values joined by ':'."""
    return ":".join(str(value) for value in primary_key)


def tables_namespace(namespace: str) -> str:
    return f"{namespace}:tables"


def rows_namespace(namespace: str, table_name: str) -> str:
    """The token namespace of a table (its table tokens and one token per row):
    `seawall follow --map TABLE=<this>` invalidates cached session.get()s row by row.
    A "." joins them, as --map takes no ":" in a namespace (which the QueryCache's own
    namespaces use, so the two kinds never collide)."""
    return f"{namespace}.{table_name}"


def is_read_only_text(sql: str) -> bool:
    """A textual statement that cannot write: a single plain SELECT.

    Anything else run through the session (DML, DDL, a CTE, several statements) may write
    tables nobody can name, so the commit invalidates every cached result."""
    text = sql.strip().rstrip(";").lstrip("(").lower()
    return text.startswith("select") and ";" not in text and " into " not in f" {text} "


def is_setting_text(sql: str) -> bool:
    """A single SET, SET LOCAL, SHOW or RESET: it writes no table, though it may change
    what the transaction's later statements read (a search_path, an isolation level)."""
    text = sql.strip().rstrip(";").lower()
    first = text.split(None, 1)[0] if text else ""
    return first in ("set", "show", "reset") and ";" not in text
