"""Where a cached statement runs, for QueryCacheCore: its connection and isolation, the
execution options and database that name its key besides the statement, the
do_orm_execute listeners registered after QueryCache's, and the real COMMIT of a
transaction a session joined without owning it. No Redis."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine.base import RootTransaction
from sqlalchemy.orm import ORMExecuteState

from seawall.sqlalchemy import _keys

# Isolation levels where each statement reads a fresh snapshot.
PER_STATEMENT = frozenset({"READ COMMITTED", "READ UNCOMMITTED", "AUTOCOMMIT"})


# Writes of sessions that joined a transaction they do not commit, per DBAPI connection
# (SQLAlchemy's pooled proxy), invalidated after that connection's next COMMIT.
_PENDING: dict[int, list[tuple[Callable[[Any], None], Any]]] = {}
WRAPPED = "_seawall_query_cache_commit"


def invalidate_after_commit(
    connection: Any, invalidate: Callable[[Any], None], writes: Any
) -> None:
    """Call invalidate(writes) once `connection`'s own transaction COMMITs (forget them if
    it rolls back): the dialect's do_commit is wrapped, as no event follows a COMMIT."""
    dialect = connection.dialect
    if not getattr(dialect, WRAPPED, False):
        dialect.do_commit = _after_do_commit(dialect.do_commit)
        setattr(dialect, WRAPPED, True)
    if not event.contains(connection, "rollback", _forget_pending):
        event.listen(connection, "rollback", _forget_pending)
    _PENDING.setdefault(id(connection.connection), []).append((invalidate, writes))


def joined_connections(transaction: Any) -> list[Any]:
    """Connections of a session's root transaction whose COMMIT the session does not
    issue: joined to a transaction begun outside it (Session(bind=conn) inside
    conn.begin()), or through a SAVEPOINT (join_transaction_mode="create_savepoint")."""
    joined = []
    for connection, trans, should_commit, _ in transaction._connections.values():
        if not (should_commit and isinstance(trans, RootTransaction)):
            joined.append(connection)
    return joined


def _after_do_commit(do_commit: Callable[[Any], None]) -> Callable[[Any], None]:
    def committed_then_invalidate(dbapi_connection: Any) -> None:
        do_commit(dbapi_connection)
        for invalidate, writes in _PENDING.pop(id(dbapi_connection), ()):
            invalidate(writes)

    return committed_then_invalidate


def _forget_pending(connection: Any) -> None:
    _PENDING.pop(id(connection.connection), None)


def load_options(state: ORMExecuteState) -> Any:
    """The ORM's load options (populate_existing, refresh, identity token), also for a
    from_statement(), whose state does not expose them."""
    if state.is_select:
        return state.load_options
    return state.execution_options.get("_sa_orm_load_options")


def run_later_listeners(state: ORMExecuteState) -> Any:
    """Run the do_orm_execute listeners after this one, as SQLAlchemy would have: the
    first answer returned, else None (none of them will run again for this execution)."""
    todo = state._events_todo
    for index in range(state._starting_event_idx + 1, len(todo)):
        state._starting_event_idx = index
        answer = todo[index](state)
        if answer:
            return answer
    return None


def connection_of(state: ORMExecuteState) -> Any:
    """The Connection the statement will run on if the transaction holds one, else its
    Engine (or the Connection the session is bound to)."""
    session = state.session
    statement: Any = state.statement
    bind: Any = session.get_bind(mapper=state.bind_mapper, clause=statement)
    transaction = session.get_transaction()
    if transaction is not None:
        held: Any = transaction._connections
        entry = held.get(bind) or held.get(getattr(bind, "engine", None))
        if entry:
            return entry[0]
    return bind


def context_of(state: ORMExecuteState, connection: Any) -> str | None:
    """What besides the statement decides its rows: the database (its URL without driver
    or password), the execution options of the engine, the connection and the call
    (schema_translate_map, ...) and the ORM's identity token. None if an option is not
    plain data (such a statement is not cached)."""
    engine = getattr(connection, "engine", connection)
    database = database_of(engine)
    given = state.execution_options
    around = getattr(connection, "_execution_options", None)
    token = getattr(load_options(state), "_identity_token", None)
    if not around and token is None and all(name[0] == "_" for name in given):
        return database  # the common case: no option at all
    options = {**(around or {}), **given}
    if token is not None:
        options["identity_token"] = token
    return _keys.context_text(database, options)


_DATABASES: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def database_of(engine: Any) -> str:
    """The engine's URL without driver or password (sync and asyncio drivers of one
    database share keys), memoized per Engine."""
    found = _DATABASES.get(engine)
    if found is None:
        url = engine.url
        bare = url.set(drivername=url.get_backend_name())
        found = _DATABASES[engine] = bare.render_as_string(hide_password=True)
    return found


def per_statement_snapshot(connection: Any) -> bool:
    engine = getattr(connection, "engine", connection)
    dialect = engine.dialect
    if dialect.name == "sqlite":  # pysqlite opens no transaction for SELECTs
        return True
    level = (
        getattr(connection, "_execution_options", {}).get("isolation_level")
        or getattr(engine, "_execution_options", {}).get("isolation_level")
        or getattr(dialect, "isolation_level", None)
        or getattr(dialect, "default_isolation_level", None)
    )
    return isinstance(level, str) and level.upper() in PER_STATEMENT
