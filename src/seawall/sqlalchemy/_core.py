"""QueryCache's read path and invalidation, shared by the sync and asyncio faces.

Reads: a SELECT carrying cached() is answered from a seawall Cache under a key that folds in
the version token of every table its result may include. Writes: the tables (and, for the
unit of work, the rows) a transaction wrote are recorded in session.info; after COMMIT their
tokens are deleted, so every later key differs. A rollback forgets them.

The two faces differ only in how a Cache call is made (`_run`: a plain call, or
`await_only` inside SQLAlchemy's asyncio greenlet) and how a loader is wrapped.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine.result import IteratorResult, SimpleResultMetaData
from sqlalchemy.orm import Mapper, ORMExecuteState, Session

from seawall._async.cache_base import REDIS_DOWN
from seawall._validate import check_name, check_seconds
from seawall.errors import CacheUnavailable, CacheWaitTimeout
from seawall.sqlalchemy import _keys, _tables
from seawall.sqlalchemy._option import find_cached
from seawall.sqlalchemy._rows import decode_result, encode_result
from seawall.sqlalchemy._writes import INFO_KEY, WriteRecorder, Writes

log = logging.getLogger("seawall.sqlalchemy")

# Keys in a table's namespace next to its row keys (which are primary-key texts, as
# `seawall follow` writes them; no primary key's text starts with NUL in practice).
TABLE_TOKEN = "\x00table"  # replaced by every write to the table
BULK_TOKEN = "\x00bulk"  # replaced by writes whose rows are unknown (bulk DML, invalidate())
EVERYTHING_KEY = "all"  # replaced by a textual write nobody can attribute to tables

# How long a version token lives unused. Expiry is harmless (a new token means misses).
TOKEN_TTL = 86_400.0

# Isolation levels where each statement reads a fresh snapshot.
PER_STATEMENT = frozenset({"READ COMMITTED", "READ UNCOMMITTED", "AUTOCOMMIT"})

ATTACHED = "_seawall_query_cache"
WARN_EVERY = 30.0
MEMO_SIZE = 2000


@dataclass(frozen=True)
class Described:
    sql_text: str
    structure: str
    tables: tuple[str, ...]


def new_token() -> str:
    return secrets.token_hex(6)


class QueryCacheCore(WriteRecorder):
    """Everything but the Cache calls' flavour (see module docstring)."""

    def __init__(self, client: Any, namespace: str, ttl: float = 300.0, **cache_options: Any):
        super().__init__()
        self.namespace = check_name(namespace, "QueryCache")
        self.ttl = check_seconds(ttl, f"ttl of QueryCache {self.namespace!r}")
        self._client = client
        if "bloom" in cache_options:
            raise TypeError(
                f"QueryCache {self.namespace!r}: bloom= does not apply (result keys are "
                "digests, never ids a filter could hold); remove it"
            )
        self._options = {"stale_ttl": 0, **cache_options}
        token_options = {**self._options, "stale_ttl": 0}
        self._token_options = token_options
        self.entries = self._make_cache(f"{self.namespace}:q", self.ttl, self._options)
        self._everything = self._make_cache(f"{self.namespace}:*", TOKEN_TTL, token_options)
        self._tables: dict[str, Any] = {}
        self._memo: dict[Any, Described] = {}
        self._mappers: dict[str, Mapper[Any]] = {}
        self._warned_at = -WARN_EVERY

    # -- the face's flavour ------------------------------------------------------------

    def _make_cache(self, namespace: str, ttl: float, options: dict[str, Any]) -> Any:
        raise NotImplementedError

    def _run(self, call: Any) -> Any:
        raise NotImplementedError

    def _loader(self, load: Callable[[], Any]) -> Callable[[], Any]:
        raise NotImplementedError

    # -- attaching ---------------------------------------------------------------------

    def _listen(self, target: type[Session]) -> None:
        if target.__dict__.get(ATTACHED) is not None:
            raise ValueError(
                f"{target.__qualname__} already has a QueryCache "
                f"({target.__dict__[ATTACHED].namespace!r}); attach one per session factory"
            )
        setattr(target, ATTACHED, self)
        event.listen(target, "do_orm_execute", self._on_execute)
        event.listen(target, "after_commit", self._on_commit)
        self._listen_writes(target)

    # -- reads -------------------------------------------------------------------------

    def _on_execute(self, state: ORMExecuteState) -> Any:
        option = find_cached(state.user_defined_options)
        if not state.is_select:
            if option is not None:
                raise TypeError(
                    f"QueryCache {self.namespace!r}: cached() applies to SELECT statements "
                    f"and session.get() only, not to {_short(state.statement)}; remove it"
                )
            self._note_write(state)
            return None
        if option is None or state.is_relationship_load:
            return None
        load_options = state.load_options
        if getattr(load_options, "_refresh_state", None) is not None:
            return None  # a refresh or an expired attribute: the database answers
        if getattr(load_options, "_populate_existing", False):
            return None  # the caller asked for the rows as they are now
        if getattr(state.statement, "_for_update_arg", None) is not None:
            return None  # FOR UPDATE takes row locks: only the database can
        if isinstance(state.parameters, list) or self._must_read_database(state):
            return None
        return self._cached_execute(state, option.ttl)

    def _must_read_database(self, state: ORMExecuteState) -> bool:
        """A session with changes of its own, flushed or not, sees rows nobody else does;
        a snapshot taken earlier in a REPEATABLE READ transaction may predate tokens."""
        session = state.session
        if session._new or session._deleted or session.identity_map._modified:
            return True
        if session.info.get(INFO_KEY):
            return True
        transaction = session.get_transaction()
        if transaction is None or not transaction._connections:
            return False
        bind = session.get_bind(mapper=state.bind_mapper)
        return not _per_statement_snapshot(getattr(bind, "engine", bind))

    def _cached_execute(self, state: ORMExecuteState, ttl: float | None) -> Any:
        statement: Any = state.statement
        parameters: Any = state.parameters
        cache_key = statement._generate_cache_key()
        if cache_key is None:  # SQLAlchemy cannot name it (e.g. a lambda with closures)
            return None
        described = self._describe(statement, cache_key.key, state)
        params = _keys.param_values(
            [(bind.key, bind.effective_value) for bind in cache_key.bindparams], parameters
        )
        digest = _keys.fingerprint(described.sql_text, described.structure, params)
        stash: dict[str, Any] = {}

        def load() -> Any:
            try:
                frozen = state.invoke_statement().freeze()
            except BaseException:
                stash["failed"] = True
                raise
            stash["frozen"] = frozen
            keys = list(frozen.metadata.keys)
            return encode_result(keys, frozen._rewrite_rows(), _short(statement))

        try:
            key = self._entry_key(state, described, digest)
            payload = self._run(self.entries.get_or_load(key, self._loader(load), ttl=ttl))
        except (*REDIS_DOWN, CacheUnavailable, CacheWaitTimeout) as exc:
            if "failed" in stash:
                raise
            if "frozen" in stash:
                return stash["frozen"]()
            self._warn_down(exc, statement)
            return None  # SQLAlchemy runs the statement against the database
        if "frozen" in stash:  # this call loaded it: its instances are already in session
            return stash["frozen"]()
        return self._rebuild(state, payload)

    def _entry_key(self, state: ORMExecuteState, described: Described, digest: str) -> str:
        """Version tokens are read before the database is: a result read before a commit
        is stored under tokens that commit deletes, where no later reader looks."""
        row = _get_target(state)
        tokens = []
        for table in described.tables:
            own = row is not None and table in row[1]
            tokens.append(self._token(table, BULK_TOKEN if own else TABLE_TOKEN))
        tokens.append(self._run(self._everything.get_or_load(EVERYTHING_KEY, new_token)))
        if row is None:
            return _keys.entry_key("q", digest, tokens)
        tokens.append(self._token(row[0], row[2]))
        return _keys.entry_key("g", digest, tokens)

    def _token(self, table: str, key: str) -> str:
        token: str = self._run(self._table_cache(table).get_or_load(key, new_token))
        return token

    def _table_cache(self, table: str) -> Any:
        found = self._tables.get(table)
        if found is None:
            found = self._make_cache(
                _keys.rows_namespace(self.namespace, table), TOKEN_TTL, self._token_options
            )
            self._tables[table] = found
        return found

    def _describe(self, statement: Any, structure: Any, state: ORMExecuteState) -> Described:
        found = self._memo.get(structure)
        if found is None:
            tables = _tables.read_tables(statement, state.all_mappers)
            found = Described(str(statement), _keys.normalize(structure), tuple(sorted(tables)))
            if len(self._memo) >= MEMO_SIZE:
                self._memo.clear()
            self._memo[structure] = found
        return found

    def _rebuild(self, state: ORMExecuteState, payload: Any) -> Any:
        """Cached rows as a Result, with no SQL. Rows already in the session are used as
        they are (as a query does); the others join it as persistent instances."""
        session = state.session
        identity_map = session.identity_map
        try:
            keys, rows, built = decode_result(payload, self._mapper_index(state), identity_map.get)
        except LookupError:  # a class mapped since the index was made
            self._mappers.clear()
            keys, rows, built = decode_result(payload, self._mapper_index(state), identity_map.get)
        # Attached as the ORM's loader attaches the rows of a query (loading.py), with the
        # same events: `load` (context None; sqlalchemy.ext.mutable relies on it) and
        # `loaded_as_persistent`.
        session_id = session.hash_key
        as_persistent = session.dispatch.loaded_as_persistent
        for instance in built:
            instance.session_id = session_id
            identity_map._add_unpresent(instance, instance.key)
            if instance.manager.dispatch.load:
                instance.manager.dispatch.load(instance, None)
            if as_persistent:
                as_persistent(session, instance)
        return IteratorResult(SimpleResultMetaData(keys), iter([tuple(row) for row in rows]))

    def _mapper_index(self, state: ORMExecuteState) -> dict[str, Mapper[Any]]:
        if not self._mappers:
            mapper = state.bind_mapper
            if mapper is not None:
                for known in mapper.registry.mappers:
                    name = f"{known.class_.__module__}.{known.class_.__qualname__}"
                    self._mappers[name] = known
        return self._mappers

    # -- writes ------------------------------------------------------------------------

    def _on_commit(self, session: Session) -> None:
        if session.in_nested_transaction():  # a SAVEPOINT released: nothing is committed yet
            return
        writes = session.info.pop(INFO_KEY, None)
        if not writes:
            return
        try:
            self._invalidate(writes)
        except Exception:  # the COMMIT is done: raising would tell the caller it failed
            log.exception(
                "QueryCache %r: invalidating after COMMIT failed; results of tables %s "
                "may be served until their ttl",
                self.namespace,
                sorted(writes.tables | writes.bulk | set(writes.rows)),
            )

    def _drops(self, writes: Writes) -> list[tuple[Any, list[str]]]:
        """(cache, keys) to delete: one delete_many, one round trip, per written table."""
        drops: list[tuple[Any, list[str]]] = []
        for table in sorted(writes.tables | writes.bulk | set(writes.rows)):
            keys = [TABLE_TOKEN]
            if table in writes.bulk:
                keys.append(BULK_TOKEN)
            keys.extend(sorted(writes.rows.get(table, ())))
            drops.append((self._table_cache(table), keys))
        if writes.everything:
            drops.append((self._everything, [EVERYTHING_KEY]))
        return drops

    def _invalidate(self, writes: Writes) -> None:
        for cache, keys in self._drops(writes):
            try:
                self._run(cache.delete_many(keys))
            except (*REDIS_DOWN, CacheUnavailable) as exc:
                self._retry_later(cache, keys, exc)

    def _retry_later(self, cache: Any, keys: list[str], exc: BaseException) -> None:
        log.error(
            "QueryCache %r: could not invalidate %s after COMMIT (%r); this process retries "
            "in the background, and until then other processes may read the old results",
            self.namespace,
            cache.namespace,
            exc,
        )
        try:  # the Cache's delayed-delete sweeper retries until Redis answers
            self._run(cache.delete_many(keys, again_after=0.5))
        except (*REDIS_DOWN, CacheUnavailable):
            pass

    def _table_drops(self, tables: tuple[Any, ...]) -> list[tuple[Any, list[str]]]:
        writes = Writes()
        for table in tables:
            names = _names_of(table)
            writes.tables |= names
            writes.bulk |= names
        return self._drops(writes)

    def _warn_down(self, exc: BaseException, statement: Any) -> None:
        now = time.monotonic()
        if now - self._warned_at >= WARN_EVERY:
            self._warned_at = now
            log.warning(
                "QueryCache %r: Redis is unreachable or too slow (%r); reading %s from the "
                "database (this warning repeats at most every %.0f s)",
                self.namespace,
                exc,
                _short(statement),
                WARN_EVERY,
            )


def _names_of(table: Any) -> set[str]:
    if isinstance(table, str):
        return {table}
    mapper = getattr(table, "__mapper__", None)
    if isinstance(mapper, Mapper):
        return {_tables.table_name(t) for t in mapper.tables}
    return {_tables.table_name(table)}


def _get_target(state: ORMExecuteState) -> tuple[str, frozenset[str], str] | None:
    """(row table, tables of the row's mapper, row key) when this is session.get()'s
    SELECT by primary key, else None."""
    mapper = state.bind_mapper
    criteria: Any = getattr(state.statement, "_where_criteria", ())
    if mapper is None or len(criteria) != 1:
        return None
    clause, binds = mapper._get_clause
    if criteria[0] is not clause or not isinstance(state.parameters, dict):
        return None
    try:
        values = [state.parameters[binds[column].key] for column in mapper.primary_key]
    except KeyError:
        return None
    own = frozenset(_tables.table_name(table) for table in mapper.tables)
    base = _tables.table_name(mapper.base_mapper.local_table)
    return base, own, _keys.row_key(values)


def _per_statement_snapshot(engine: Any) -> bool:
    dialect = engine.dialect
    if dialect.name == "sqlite":  # pysqlite opens no transaction for SELECTs
        return True
    level = (
        getattr(engine, "_execution_options", {}).get("isolation_level")
        or getattr(dialect, "isolation_level", None)
        or getattr(dialect, "default_isolation_level", None)
    )
    return isinstance(level, str) and level.upper() in PER_STATEMENT


def _short(statement: Any) -> str:
    text = " ".join(str(statement).split())
    return f"statement {text[:120]!r}" + ("..." if len(text) > 120 else "")
