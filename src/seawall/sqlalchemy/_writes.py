"""What a session's transaction wrote, recorded in session.info until it ends. No Redis.

Three sources, so no write made through a watched session goes unnoticed:
- Session.execute() of DML or text (do_orm_execute): tables, rows unknown ("bulk");
- the unit of work (after_flush): tables, and each flushed row's primary key;
- the transaction's connection (after_cursor_execute): whatever reaches the database
  another way (session.connection().execute(), the legacy bulk_* methods).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import ORMExecuteState, Session
from sqlalchemy.sql.elements import TextClause, _IdentifiedClause
from sqlalchemy.sql.expression import TableClause

from seawall.sqlalchemy import _keys, _tables

INFO_KEY = "seawall.query_cache.writes"
IN_FLUSH = "seawall.query_cache.in_flush"


@dataclass
class Writes:
    """What the current transaction of one session wrote (kept in session.info)."""

    tables: set[str] = field(default_factory=set)
    bulk: set[str] = field(default_factory=set)
    rows: dict[str, set[str]] = field(default_factory=dict)
    everything: bool = False


def is_read_statement(statement: Any) -> bool:
    """A SELECT, or a textual statement that is a single plain SELECT (also inside a
    from_statement() or text().columns())."""
    inner = getattr(statement, "element", None)  # FromStatement, TextualSelect
    if inner is not None and inner is not statement:
        return is_read_statement(inner)
    if isinstance(statement, TextClause):
        return _keys.is_read_only_text(statement.text)
    return bool(getattr(statement, "is_select", False))


def driver_committed(connection: Any) -> bool:
    """Whether the DBAPI connection is out of any transaction after a write: the driver
    ran it outside one, so it is committed and no rollback undoes it. pysqlite's default
    mode opens a transaction only before a statement that starts with INSERT, UPDATE,
    DELETE or REPLACE: `WITH ... INSERT INTO ...` (an insert().from_select() reading a
    CTE) is committed as it runs. A driver with no `in_transaction` is taken to run every
    write inside the transaction."""
    dbapi = getattr(connection.connection, "dbapi_connection", None)
    return getattr(dbapi, "in_transaction", None) is False


class WriteRecorder:
    """Session event handlers that fill session.info[INFO_KEY]; QueryCacheCore acts on it."""

    def __init__(self) -> None:
        # Connections of watched sessions -> the session now using each (see _on_begin).
        self._connections: weakref.WeakKeyDictionary[Any, weakref.ref[Session]] = (
            weakref.WeakKeyDictionary()
        )

    def _listen_writes(self, target: type[Session]) -> None:
        event.listen(target, "after_flush", self._on_flush)
        event.listen(target, "after_transaction_end", self._on_transaction_end)
        event.listen(target, "after_begin", self._on_begin)
        event.listen(target, "before_flush", self._on_before_flush)
        event.listen(target, "after_flush_postexec", self._on_flush_done)
        event.listen(target, "after_soft_rollback", self._on_flush_done)

    def _writes(self, session: Session) -> Writes:
        found: Writes | None = session.info.get(INFO_KEY)
        if found is None:
            found = session.info[INFO_KEY] = Writes()
        return found

    def _note_write(self, state: ORMExecuteState) -> None:
        statement = state.statement
        if state.is_insert or state.is_update or state.is_delete:
            names = _tables.dml_tables(statement, state.bind_mapper)
            writes = self._writes(state.session)
            writes.tables |= names
            writes.bulk |= names
        elif state.is_from_statement and is_read_statement(statement):
            return  # select(User).from_statement(text("SELECT ...")): a read
        elif isinstance(statement, TextClause) and _keys.is_read_only_text(statement.text):
            return
        elif isinstance(statement, TextClause) and _keys.is_setting_text(statement.text):
            self._writes(state.session)  # no table written; the session reads the database
        else:
            self._writes(state.session).everything = True

    def _on_begin(self, session: Session, transaction: Any, connection: Any) -> None:
        """Watch what the transaction's connection executes: writes that bypass the
        session's execute() (session.connection().execute(), the legacy bulk_* methods)
        still reach the database through it. One listener per connection, ever."""
        known = connection in self._connections
        self._connections[connection] = weakref.ref(session)
        if not known:
            event.listen(connection, "after_cursor_execute", self._on_cursor)

    def _on_cursor(
        self,
        connection: Any,
        cursor: Any,
        statement: str,
        parameters: Any,
        context: Any,
        executemany: bool,
    ) -> None:
        ref = self._connections.get(connection)
        session = None if ref is None else ref()
        if session is None or session.get_transaction() is None:
            return
        compiled = context.compiled
        core = getattr(compiled, "statement", None)
        if context.isinsert or context.isupdate or context.isdelete:
            table = getattr(core, "table", None)
            if not isinstance(table, TableClause):
                self._writes(session).everything = True
            else:  # a flush's rows are named by after_flush
                self._note_table(session, table, context.isinsert, session.info.get(IN_FLUSH))
        elif isinstance(core, _IdentifiedClause):  # SAVEPOINT, RELEASE, ROLLBACK TO
            return
        elif _keys.is_setting_text(statement):
            self._writes(session)  # no table written; the session reads the database
            return
        elif getattr(core, "is_select", False) or _keys.is_read_only_text(statement):
            written = _tables.cte_writes(compiled)  # WITH u AS (UPDATE ... RETURNING) SELECT
            if not written:
                return
            for table, inserts in written:
                self._note_table(session, table, inserts, False)
        else:
            self._writes(session).everything = True
        if connection._is_autocommit_isolation() or driver_committed(connection):
            self._committed_now(session)  # the database has committed it already

    def _note_table(self, session: Session, table: Any, inserts: bool, rows_named: Any) -> None:
        writes = self._writes(session)
        name = _tables.table_name(table)
        writes.tables.add(name)
        writes.tables |= _tables.declared_reads(table)  # a write through a view
        if not rows_named:
            writes.bulk.add(name)
            writes.bulk |= _tables.declared_reads(table)
        if not inserts:  # ON DELETE/UPDATE actions write other tables' rows
            followers = _tables.cascaded_tables(table)
            writes.tables |= followers
            writes.bulk |= followers

    def _on_before_flush(self, session: Session, *args: Any) -> None:
        # A unit-of-work flush (not the legacy bulk_* methods, which flush nothing).
        session.info[IN_FLUSH] = True

    def _on_flush_done(self, session: Session, *args: Any) -> None:
        session.info.pop(IN_FLUSH, None)

    def _on_flush(self, session: Session, flush_context: Any) -> None:
        writes = self._writes(session)
        mappers = {state.mapper for state in flush_context.states}
        writes.tables |= _tables.written_tables(mappers)
        for state in flush_context.states:
            # New rows get their identity key only after this event, and a changed
            # primary key its new one: both the old key and the instance's are written.
            identity: Any = state.key
            obj = state.obj()
            keys = [] if identity is None else [identity[1]]
            if obj is not None:
                keys.append(state.mapper.primary_key_from_instance(obj))
            base = _tables.table_name(state.mapper.base_mapper.local_table)
            for values in keys:
                if not any(value is None for value in values):
                    writes.rows.setdefault(base, set()).add(_keys.row_key(values))
        transaction: Any = session.get_transaction()
        held = () if transaction is None else transaction._connections.values()
        if any(entry[0]._is_autocommit_isolation() for entry in held):
            self._committed_now(session)

    def _committed_now(self, session: Session) -> None:
        """The session's writes are committed already (an AUTOCOMMIT connection): act on
        them now, not at a COMMIT that may never come (close() ends such a session)."""
        raise NotImplementedError

    def _on_transaction_end(self, session: Session, transaction: Any) -> None:
        if transaction.parent is None:  # the root: committed (done above) or rolled back
            session.info.pop(INFO_KEY, None)
            session.info.pop(IN_FLUSH, None)
