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
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine.result import IteratorResult, SimpleResultMetaData
from sqlalchemy.orm import Mapper, ORMExecuteState, Session

from seawall.cache._async.base import REDIS_DOWN
from seawall.cache._l1 import MISSING
from seawall.errors import CacheUnavailable, CacheWaitTimeout
from seawall.shared._validate import check_name, check_seconds
from seawall.sqlalchemy import _context, _keys, _tables
from seawall.sqlalchemy._option import find_cached
from seawall.sqlalchemy._rows import decode_result, encode_result
from seawall.sqlalchemy._writes import INFO_KEY, WriteRecorder, Writes, is_read_statement

log = logging.getLogger("seawall.sqlalchemy")

# Keys in a table's namespace next to its row keys (which are primary-key texts, as
# `seawall follow` writes them; no primary key's text starts with NUL in practice).
TABLE_TOKEN = "\x00table"  # replaced by every write to the table
BULK_TOKEN = "\x00bulk"  # replaced by writes whose rows are unknown (bulk DML, invalidate())
EVERYTHING_KEY = "all"  # replaced by a textual write nobody can attribute to tables

# How long a version token lives unused. Expiry is harmless (a new token means misses).
TOKEN_TTL = 86_400.0

ATTACHED = "_seawall_query_cache"
# Primary-key value types a database compares as Python does: a get by them is keyed by
# its row's own token.
ROW_KEY_TYPES = frozenset({int, uuid.UUID})
WARN_EVERY = 30.0
MEMO_SIZE = 2000
GUESSES = 10_000


@dataclass(frozen=True)
class Described:
    sql_text: str
    structure: str
    tables: tuple[str, ...]
    related: frozenset[str]  # tables reached through relationships it loads
    writes: bool  # a data-modifying CTE: a SELECT that writes is never cached


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
        # The token values last seen, per (token cache's namespace, token key): guesses
        # that let a read take one round trip (see _guessed); never trusted as they are.
        self._guesses: dict[tuple[str, str], str] = {}
        self._mappers: dict[str, Mapper[Any]] = {}
        self._warned_at = -WARN_EVERY
        self._views: dict[str, frozenset[str]] = {}  # per database URL
        self._warned_views: set[str] = set()

    # -- the face's flavour ------------------------------------------------------------

    def _make_cache(self, namespace: str, ttl: float, options: dict[str, Any]) -> Any:
        raise NotImplementedError

    def _run(self, call: Any) -> Any:
        raise NotImplementedError

    def _loader(self, load: Callable[[], Any]) -> Callable[[], Any]:
        raise NotImplementedError

    def _plain_reads(self, reads: list[tuple[Any, str]]) -> Any:
        """The cache layer's plain_reads (cache/_async/reads.py) of the face's flavour (a
        call for _run)."""
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
        reads = state.is_select or (state.is_from_statement and is_read_statement(state.statement))
        if not reads:
            if option is not None:
                raise TypeError(
                    f"QueryCache {self.namespace!r}: cached() applies to SELECT statements "
                    f"and session.get() only, not to {_short(state.statement)}; remove it"
                )
            self._note_write(state)
            return None
        if option is None or state.is_relationship_load:
            return None
        if not state._remaining_events():
            return self._cacheable_execute(state, option.ttl)
        # do_orm_execute listeners registered after attach() (the multi-tenant recipe adds
        # with_loader_criteria there) would run only on a miss, after the key is made:
        # they run first, on this state, so the key names the statement they leave.
        answer = _context.run_later_listeners(state)
        if answer is not None:  # a later listener answered (it ran the statement itself)
            return answer
        answer = self._cacheable_execute(state, option.ttl)
        # Returning None would have SQLAlchemy run those listeners a second time.
        return state.invoke_statement() if answer is None else answer

    def _cacheable_execute(self, state: ORMExecuteState, ttl: float | None) -> Any:
        load_options = _context.load_options(state)
        if getattr(load_options, "_refresh_state", None) is not None:
            return None  # a refresh or an expired attribute: the database answers
        if getattr(load_options, "_populate_existing", False):
            return None  # the caller asked for the rows as they are now
        if getattr(state.statement, "_for_update_arg", None) is not None:
            return None  # FOR UPDATE takes row locks: only the database can
        if isinstance(state.parameters, list):
            return None
        connection = _context.connection_of(state)
        if self._must_read_database(state, connection):
            return None
        context = _context.context_of(state, connection)
        if context is None:  # an execution option that is not plain data
            return None
        return self._cached_execute(state, ttl, context, connection)

    def _must_read_database(self, state: ORMExecuteState, connection: Any) -> bool:
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
        return not _context.per_statement_snapshot(connection)

    def _cached_execute(
        self, state: ORMExecuteState, ttl: float | None, context: str, connection: Any
    ) -> Any:
        statement: Any = state.statement
        parameters: Any = state.parameters
        cache_key = statement._generate_cache_key()
        if cache_key is None:  # SQLAlchemy cannot name it (e.g. a lambda with closures)
            return None
        described = self._describe(statement, cache_key.key, state)
        if described.writes or _tables.UNKNOWN in described.tables:
            return None  # it writes, or reads tables that cannot be named
        if self._reads_undeclared_view(state, described, connection):
            return None
        params = _keys.param_values(
            [(bind.key, bind.effective_value) for bind in cache_key.bindparams], parameters
        )
        digest = _keys.fingerprint(described.sql_text, described.structure, params, context)
        stash: dict[str, Any] = {}

        def load() -> Any:
            # populate_existing: the rows read overwrite instances the session already
            # holds (it has no changes of its own, see _must_read_database), so what is
            # stored is what the database returned, not what the session read earlier;
            # collections loaded before (selectin, joined) are read again, lazy ones reset.
            try:
                frozen = state.invoke_statement(
                    execution_options={"populate_existing": True}
                ).freeze()
            except BaseException:
                stash["failed"] = True
                raise
            stash["frozen"] = frozen
            # _keys, not keys: an unnamed aliased entity (with_polymorphic, aliased) has
            # the key None, which the keys view leaves out (one key fewer than cells).
            keys = list(frozen.metadata._keys)
            covered = frozenset(described.tables)
            return encode_result(keys, frozen._rewrite_rows(), _short(statement), covered)

        try:
            payload = self._payload(state, described, digest, self._loader(load), ttl)
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

    def _reads_undeclared_view(
        self, state: ORMExecuteState, described: Described, connection: Any
    ) -> bool:
        """A view is written through its base tables, whose tokens a key names only if
        the view's Table declares them (info={"seawall.reads": [...]}): a statement
        reading a view that does not is not cached. Views are listed once per database."""
        engine = getattr(connection, "engine", connection)
        database = _context.database_of(engine)
        views = self._views.get(database)
        if views is None:
            try:
                views = _tables.view_names(engine)
            except Exception as exc:  # a database that will not list them: say so once
                log.warning(
                    "QueryCache %r: could not list the views of %s (%r); a statement "
                    "reading a view that does not declare its tables may be cached",
                    self.namespace,
                    database,
                    exc,
                )
                views = frozenset()
            self._views[database] = views
        if not views:
            return False
        undeclared = [
            name
            for name in described.tables
            if name in views and name not in _tables.DECLARED_VIEWS
        ]
        if undeclared and undeclared[0] not in self._warned_views:
            self._warned_views.add(undeclared[0])
            log.warning(
                "QueryCache %r: %s reads the view %s, whose base tables are not declared: "
                "it is not cached. Declare them on its Table: info={%r: [table, ...]}",
                self.namespace,
                _short(state.statement),
                undeclared[0],
                _tables.READS_INFO,
            )
        return bool(undeclared)

    def _payload(
        self,
        state: ORMExecuteState,
        described: Described,
        digest: str,
        loader: Callable[[], Any],
        ttl: float | None,
    ) -> Any:
        """The cached result, under a key built from the version tokens of every table it
        may include. Tokens are read before the database is: a result read before a commit
        is stored under tokens that commit deletes, where no later reader looks.

        Tokens come from the token caches' L1s (no I/O) where they hold them; the others
        are read in one round trip together with the entry their last seen values name
        (see _guessed). Only when that guess fails do tokens and entry cost a round trip
        each, as get_or_load reads them."""
        kind, wanted = self._tokens_of(state, described)
        tokens: list[str | None] = []
        for cache, text in wanted:
            found = cache._peek(text)
            tokens.append(found if isinstance(found, str) else None)
        if None in tokens:
            payload = self._guessed(kind, digest, wanted, tokens)
            if payload is not MISSING:
                return payload
        for index, (cache, text) in enumerate(wanted):
            if tokens[index] is None:
                token = self._run(cache.get_or_load(text, new_token))
                tokens[index] = self._remember(cache, text, token)
        key = _keys.entry_key(kind, digest, [token or "" for token in tokens])
        return self._run(self.entries.get_or_load(key, loader, ttl=ttl))

    def _guessed(
        self, kind: str, digest: str, wanted: list[tuple[Any, str]], tokens: list[str | None]
    ) -> Any:
        """The entry, if the tokens missing from `tokens` (filled in place with those read)
        still have the values this QueryCache last saw: one round trip reads them and the
        entry those values name. MISSING if it cannot tell (a token never seen here, one
        replaced or expired, the entry not held fresh, a generation not known yet).

        Why the entry so read is never stale, whatever order the reads run in (on Cluster
        they go to several nodes at once): an entry stored under key K(t1..tn) was loaded
        by a reader that had read tokens t1..tn first, and queried the database after.
        Every token here is read after this call started. A commit that returned before
        that deleted the token of each table it wrote (voiding any load of one in flight),
        and a token's value is random, never made twice. So a token read here with the
        guessed value either belongs to a table that commit did not write, or was stored
        after the commit's delete, and so was read by that loader after the commit, before
        its database read. Tokens taken from an L1 are as fresh as the L1 is (its
        invalidation broadcast), as on a hit with no I/O."""
        unread = [index for index, token in enumerate(tokens) if token is None]
        guesses = [self._guesses.get(_guess_key(*wanted[index])) for index in unread]
        reads = [wanted[index] for index in unread]
        if None not in guesses:
            guess = iter(guesses)
            named = [token or next(guess) or "" for token in tokens]
            reads.append((self.entries, _keys.entry_key(kind, digest, named)))
        try:
            answers = self._run(self._plain_reads(reads))
        except REDIS_DOWN:
            if self.entries.breaker is None:
                raise
            return MISSING  # get_or_load degrades as the breaker says
        if answers is None:
            return MISSING
        same = len(answers) > len(unread)
        for index, expected, answer in zip(unread, guesses, answers, strict=False):
            token = answer()
            if isinstance(token, str):
                tokens[index] = self._remember(*wanted[index], token)
            same = same and token == expected
        return answers[-1]() if same else MISSING

    def _tokens_of(
        self, state: ORMExecuteState, described: Described
    ) -> tuple[str, list[tuple[Any, str]]]:
        """(kind of entry, (token cache, token key) of each token its key folds in)."""
        row = _get_target(state)
        wanted = []
        for table in described.tables:
            # A table's rows other than the one got (a tree loaded eagerly) are seen by
            # its table token only.
            own = row is not None and table in row[1] and table not in described.related
            wanted.append((self._table_cache(table), BULK_TOKEN if own else TABLE_TOKEN))
        wanted.append((self._everything, EVERYTHING_KEY))
        if row is None:
            return "q", wanted
        wanted.append((self._table_cache(row[0]), row[2]))
        return "g", wanted

    def _remember(self, cache: Any, text: str, token: str) -> str:
        """Keep `token` as the guess for its key's next read (see _guessed)."""
        if len(self._guesses) >= GUESSES:
            self._guesses.clear()
        self._guesses[_guess_key(cache, text)] = token
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
            related: set[str] = set()
            tables = _tables.read_tables(statement, state.all_mappers, related)
            found = Described(
                str(statement),
                _keys.normalize(structure),
                tuple(sorted(tables)),
                frozenset(related),
                _tables.writes_in(statement),
            )
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
        except LookupError:  # a class mapped since, or of a registry not indexed yet
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
        """Mapped classes by name, from the registries of every entity the statement
        loads (a statement may join classes of two declarative bases)."""
        if not self._mappers:
            for mapper in (state.bind_mapper, *state.all_mappers):
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
        transaction: Any = session.get_transaction()
        joined = [] if transaction is None else _context.joined_connections(transaction)
        if joined:  # the session joined a transaction it does not commit: wait for that
            for connection in joined:
                _context.invalidate_after_commit(connection, self._invalidate_logged, writes)
            return
        self._invalidate_logged(writes)

    def _committed_now(self, session: Session) -> None:
        writes = session.info.pop(INFO_KEY, None)
        if writes:
            self._invalidate_logged(writes)

    def _invalidate_logged(self, writes: Writes) -> None:
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


def _guess_key(cache: Any, text: str) -> tuple[str, str]:
    return cache.namespace, text


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
    if not all(type(value) in ROW_KEY_TYPES for value in values):
        # The database may find a row whose key it spells otherwise ('ANN' finds 'ann'
        # under a case-insensitive collation, 1.0 finds 1): the write names that row
        # by its own spelling, so the get is keyed by the table token, as a query.
        return None
    own = frozenset(_tables.table_name(table) for table in mapper.tables)
    base = _tables.table_name(mapper.base_mapper.local_table)
    return base, own, _keys.row_key(values)


def _short(statement: Any) -> str:
    text = " ".join(str(statement).split())
    return f"statement {text[:120]!r}" + ("..." if len(text) > 120 else "")
