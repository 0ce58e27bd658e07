"""Which tables a statement's result can depend on, and which tables a write touched.

No I/O. Over-naming a table costs only extra misses; missing one would serve stale rows,
so every rule here errs towards naming more.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

from sqlalchemy import Column, Table
from sqlalchemy.orm import Mapper
from sqlalchemy.orm.relationships import RelationshipProperty
from sqlalchemy.sql import visitors
from sqlalchemy.sql.dml import UpdateBase
from sqlalchemy.sql.elements import ClauseElement
from sqlalchemy.sql.expression import CTE, TableClause, TextClause

# Relationship strategies that load as part of the query itself (joined, selectin,
# subquery, immediate): their tables are part of the cached result.
# Named among a statement's tables when SQL text in it may read tables nobody declared:
# such a statement is not cached.
UNKNOWN = "\x00unknown"

EAGER = frozenset({"joined", "selectin", "subquery", "immediate", False})


# Table.info key of a view (a Table mapped or queried in place of a view): the tables it
# reads, as names or Tables, e.g. info={"seawall.reads": ["authors", "posts"]}.
READS_INFO = "seawall.reads"


def declared_reads(table: Any) -> frozenset[str]:
    """The tables a Table declares it reads (a view), else none."""
    info = getattr(table, "info", None)
    declared = info.get(READS_INFO) if isinstance(info, dict) else None
    if not declared:
        return frozenset()
    DECLARED_VIEWS.add(table_name(table))
    return frozenset(name if isinstance(name, str) else table_name(name) for name in declared)


# Names of the Tables seen declaring what they read (views whose base tables are known).
DECLARED_VIEWS: set[str] = set()


# The views of a database, per dialect: (schema, name) rows, schema None for the default.
VIEW_QUERIES = {
    "postgresql": "SELECT CASE WHEN schemaname = current_schema() THEN NULL ELSE schemaname "
    "END, viewname FROM pg_views UNION ALL SELECT CASE WHEN schemaname = current_schema() "
    "THEN NULL ELSE schemaname END, matviewname FROM pg_matviews",
    "sqlite": "SELECT NULL, name FROM sqlite_master WHERE type = 'view'",
    "mysql": "SELECT CASE WHEN table_schema = DATABASE() THEN NULL ELSE table_schema END, "
    "table_name FROM information_schema.views",
}
VIEW_QUERIES["mariadb"] = VIEW_QUERIES["mysql"]


def view_names(engine: Any) -> frozenset[str]:
    """The views of the engine's database as table names ("name" in the default schema,
    "schema.name" elsewhere), read on a raw DBAPI connection (no SQLAlchemy event sees
    it). Empty for a dialect this module has no query for."""
    query = VIEW_QUERIES.get(engine.dialect.name)
    if query is None:
        return frozenset()
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        cursor.execute(query)
        rows = cursor.fetchall()
        cursor.close()
        raw.rollback()  # end the transaction the query may have begun
    finally:
        raw.close()
    return frozenset(name if schema is None else f"{schema}.{name}" for schema, name in rows)


def with_declared_reads(names: set[str], tables: Iterable[Any]) -> set[str]:
    """`names` with the tables that the views among `tables` declare they read."""
    for table in tables:
        names |= declared_reads(table)
    return names


def table_name(table: Any) -> str:
    name = getattr(table, "fullname", None)
    if not isinstance(name, str):
        raise TypeError(f"not a table: {table!r}")
    return name


def read_tables(
    statement: Any, mappers: Iterable[Mapper[Any]], related: set[str] | None = None
) -> frozenset[str]:
    """Tables a SELECT's result may include: every table the statement mentions (FROMs,
    joins, subqueries, WHERE), every table of the mapped classes it loads (inheritance),
    and the tables of relationships loaded eagerly, by option or by mapping, transitively.
    The tables reached through relationships are also added to `related` (other rows of
    them may come with the result, even of the statement's own table)."""
    names: set[str] = set()
    seen: set[Mapper[Any]] = set()
    via = set() if related is None else related
    textual = False
    for element in visitors.iterate(statement):
        if isinstance(element, TableClause):
            names.add(table_name(element))
            names |= declared_reads(element)
        elif isinstance(element, TextClause) or getattr(element, "is_literal", False):
            textual = True
        for key in ("parententity", "parentmapper"):
            found = getattr(element, "_annotations", {}).get(key)
            mapper = getattr(found, "mapper", None)
            if isinstance(mapper, Mapper):
                _add_mapper(mapper, names, seen, via)
    for mapper in mappers:
        _add_mapper(mapper, names, seen, via)
    for option in getattr(statement, "_with_options", ()):
        # with_loader_criteria's criteria, with_expression's expression, a relationship
        # option's .and_() criteria: SQL of their own, which may read other tables
        criteria = getattr(option, "where_criteria", None)
        if isinstance(criteria, ClauseElement):
            names |= expression_tables(criteria)
        for element in getattr(option, "context", ()):
            extra = [*(getattr(element, "local_opts", None) or {}).values()]
            extra += getattr(element, "_extra_criteria", None) or ()  # .and_(), expressions
            for value in extra:
                if isinstance(value, ClauseElement):
                    names |= expression_tables(value)
            for step in getattr(getattr(element, "path", None), "path", ()):
                if isinstance(step, Mapper):
                    _add_mapper(step, names, seen, via)
                elif isinstance(step, RelationshipProperty):
                    _add_relationship(step, names, seen, via)
    if textual:  # SQL text may name any table: every table its MetaData declares
        metadatas = {id(m): m for m in _metadatas(seen, statement)}
        if not metadatas:
            names.add(UNKNOWN)
        for metadata in metadatas.values():
            names.update(table_name(table) for table in metadata.tables.values())
    return frozenset(names)


def _metadatas(mappers: Iterable[Mapper[Any]], statement: Any) -> list[Any]:
    found = [getattr(mapper.local_table, "metadata", None) for mapper in mappers]
    found += [
        getattr(element, "metadata", None)
        for element in visitors.iterate(statement)
        if isinstance(element, TableClause)
    ]
    return [metadata for metadata in found if metadata is not None]


def _add_mapper(
    mapper: Mapper[Any], names: set[str], seen: set[Mapper[Any]], via: set[str]
) -> None:
    if mapper in seen:
        return
    seen.add(mapper)
    names.update(table_name(table) for table in mapper.tables)
    with_declared_reads(names, mapper.tables)
    for sub in mapper.self_and_descendants:  # polymorphic loads read subclass tables
        if sub not in seen:
            _add_mapper(sub, names, seen, via)
    for attr in mapper.column_attrs:  # a column_property may be a subquery of others
        for column in attr.columns:
            if not (isinstance(column, Column) and column.table in mapper.tables):
                names |= expression_tables(column)
    for prop in mapper.relationships:
        if prop.lazy in EAGER:
            _add_relationship(prop, names, seen, via)


def _add_relationship(
    prop: RelationshipProperty[Any], names: set[str], seen: set[Mapper[Any]], via: set[str]
) -> None:
    reached = relationship_tables(prop)
    via |= reached
    names |= reached
    _add_mapper(prop.mapper, names, seen, via)


def expression_tables(expression: Any) -> frozenset[str]:
    """Tables an SQL expression reads; with SQL text in it, every table of the MetaData
    of the tables it names (UNKNOWN if none)."""
    names: set[str] = set()
    metadatas: dict[int, Any] = {}
    textual = False
    for element in visitors.iterate(expression):
        if isinstance(element, TableClause):
            names.add(table_name(element))
            metadata = getattr(element, "metadata", None)
            if metadata is not None:
                metadatas[id(metadata)] = metadata
        elif isinstance(element, TextClause) or getattr(element, "is_literal", False):
            textual = True
    if textual:
        if not metadatas:
            names.add(UNKNOWN)
        for metadata in metadatas.values():
            names.update(table_name(table) for table in metadata.tables.values())
    return frozenset(names)


def relationship_tables(prop: RelationshipProperty[Any]) -> frozenset[str]:
    """Tables a relationship's value is read from: its target's tables (with every
    subclass's, for a polymorphic target), its association table, and every table its
    join conditions name (custom primaryjoin / secondaryjoin)."""
    names = {
        table_name(table) for mapper in prop.mapper.self_and_descendants for table in mapper.tables
    }
    if isinstance(prop.secondary, TableClause):
        names.add(table_name(prop.secondary))
    for condition in (prop.primaryjoin, prop.secondaryjoin):
        if condition is not None:
            names |= expression_tables(condition)
    return frozenset(names)


def written_tables(mappers: Iterable[Mapper[Any]]) -> set[str]:
    """Tables a unit-of-work flush of these mappers' objects may have written: their own
    tables (all of them, for joined inheritance) and their many-to-many association
    tables (a collection change inserts or deletes rows there)."""
    names: set[str] = set()
    for mapper in mappers:
        names.update(table_name(table) for table in mapper.tables)
        with_declared_reads(names, mapper.tables)  # a class mapped to an updatable view
        for prop in mapper.relationships:
            if isinstance(prop.secondary, Table):
                names.add(table_name(prop.secondary))
    return names


def dml_tables(statement: Any, mapper: Mapper[Any] | None) -> set[str]:
    """Tables an ORM-enabled or Core insert()/update()/delete() writes."""
    names: set[str] = set()
    target = getattr(statement, "table", None)
    if isinstance(target, TableClause):
        names.add(table_name(target))
    if mapper is not None:
        names.update(table_name(table) for table in mapper.tables)
    return names


def cte_writes(compiled: Any) -> list[tuple[Any, bool]]:
    """(table, is an INSERT) of each data-modifying CTE a compiled statement holds
    (`select(...).add_cte(update(...).returning(...))`): a SELECT that writes."""
    found = []
    for cte in getattr(compiled, "ctes", None) or ():
        element = getattr(cte, "element", None)
        if isinstance(element, UpdateBase):
            table = getattr(element, "table", None)
            if isinstance(table, TableClause):
                found.append((table, bool(getattr(element, "is_insert", False))))
    return found


def writes_in(statement: Any) -> bool:
    """Whether a statement holds a data-modifying CTE anywhere."""
    return any(
        isinstance(element, CTE) and isinstance(element.element, UpdateBase)
        for element in visitors.iterate(statement)
    )


def cascaded_tables(table: TableClause) -> frozenset[str]:
    """Tables whose rows the database itself changes when `table`'s rows are deleted or
    their keys updated: foreign keys with ON DELETE / ON UPDATE actions (CASCADE, SET
    NULL, ...), followed transitively, as far as the MetaData declares them.

    The ORM's DML hands over an annotated copy of the Table, equal to it and of the same
    hash but not `is` it: the copy is traded for the Table itself, or the foreign keys
    (which point at the Table) would never match it, and a memo holding the copy's empty
    answer would hand it to the Table too."""
    plain: Any = table._deannotate() if hasattr(table, "_deannotate") else table
    metadata = getattr(plain, "metadata", None)
    # Tables declared later may add foreign keys: the memo's key counts them.
    return _cascaded(plain, 0 if metadata is None else len(metadata.tables))


@functools.lru_cache(maxsize=512)
def _cascaded(table: TableClause, tables_declared: int) -> frozenset[str]:
    metadata = getattr(table, "metadata", None)
    if metadata is None:
        return frozenset()
    found: set[str] = set()
    pending = [table]
    while pending:
        parent = pending.pop()
        for child in metadata.tables.values():
            for key in child.foreign_keys:
                acts = key.ondelete or key.onupdate
                if acts and key.column.table is parent and child.fullname not in found:
                    found.add(child.fullname)
                    pending.append(child)
    return frozenset(found)
