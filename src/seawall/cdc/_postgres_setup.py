"""PostgreSQL set-up and checks for the change-log source, on its ordinary (non-replication)
connection: the server's settings and role, the publication, the slot, the followed
tables' keys and OIDs, and the server's identity. PostgresSource (postgresql.py) adds the
replication stream on top.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg2
import psycopg2.errors
import psycopg2.extras

from seawall.cdc._events import SourceError, Watched

__all__ = ["PostgresSetup", "first_line", "ident", "qualified"]

log = logging.getLogger("seawall.cdc")

_SLOT_ACTIVE = "SELECT 1 FROM pg_replication_slots WHERE slot_name = %s AND active_pid IS NOT NULL"


def ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def qualified(table: str) -> str:
    schema, _, name = table.partition(".")
    return f"{ident(schema)}.{ident(name)}"


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class PostgresSetup:
    """What PostgresSource knows and checks through its ordinary connection."""

    dbname: str
    slot: str
    publication: str
    where: str
    default_schema: str
    _params: dict[str, Any]
    _sql: Any
    _tables: dict[str, Watched]

    def close(self) -> None:
        raise NotImplementedError

    def key_columns(self, table: str) -> Sequence[str]:
        raise NotImplementedError

    def _identity(self) -> str:
        """The followed database and slot by the server's system identifier, which every
        spelling of its address shares (127.0.0.1, localhost, a DNS name), as do its
        physical standbys: followers elect one leader, and keep one checkpoint, by it."""
        try:
            conn = psycopg2.connect(
                connection_factory=psycopg2.extras.LogicalReplicationConnection, **self._params
            )
        except psycopg2.Error as exc:
            raise SourceError(
                f"cannot connect to {self.where}: {first_line(exc)}; check the URL, "
                "that the server runs, and pg_hba.conf"
            ) from None
        try:
            with conn.cursor() as cursor:
                cursor.execute("IDENTIFY_SYSTEM")
                row = cursor.fetchone()
        finally:
            conn.close()
        system, database = row[0], row[3] or self.dbname
        return f"postgresql:{system}/{database}/{self.slot}"

    def _table_oids(self) -> dict[str, int | None]:
        """Each followed table's OID now (None: no table of that name)."""
        rows = self._query_all(
            "SELECT t, to_regclass(t)::oid FROM unnest(%s::text[]) AS t",
            ([qualified(t) for t in self._tables],),
        )
        by_name = {qualified(t): t for t in self._tables}
        return {by_name[r[0]]: (int(r[1]) if r[1] is not None else None) for r in rows}

    def _check_keyable(self, table: str, column: str | None) -> None:
        keys = list(self.key_columns(table))
        sql_name = qualified(table)
        identity_row = self._query(
            "SELECT relreplident FROM pg_class WHERE oid = to_regclass(%s)", (sql_name,)
        )
        identity = identity_row[0] if identity_row else "d"
        generated = {
            r[0]: r[1]
            for r in self._query_all(
                "SELECT attname, attgenerated FROM pg_attribute WHERE attrelid = "
                "to_regclass(%s) AND attnum > 0 AND NOT attisdropped",
                (sql_name,),
            )
        }
        if column is not None and column not in generated:
            raise SourceError(
                f"table {table} has no column {column!r}: fix --map (TABLE=NAMESPACE:COLUMN)"
            )
        if not keys and identity != "f":
            raise SourceError(
                f"table {table} has no primary key, so PostgreSQL would refuse updates to "
                f"it once published: add one, or run ALTER TABLE {sql_name} "
                "REPLICA IDENTITY FULL"
            )
        keyed_by = [column] if column is not None else keys
        for name in keyed_by:
            if generated.get(name):
                raise SourceError(
                    f"column {name!r} of {table} is generated, and PostgreSQL's logical "
                    "decoding does not send generated columns: key the cache by another "
                    f"column (--map {table}=NAMESPACE:COLUMN)"
                )
        if identity == "f":
            return
        if identity == "i":
            logged = [
                r[0]
                for r in self._query_all(
                    "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = "
                    "i.indrelid AND a.attnum = ANY(i.indkey) WHERE i.indrelid = "
                    "to_regclass(%s) AND i.indisreplident",
                    (sql_name,),
                )
            ]
        else:
            logged = keys if identity == "d" else []
        missing = [name for name in keyed_by if name not in logged]
        if not missing:
            return
        what = ", ".join(repr(name) for name in missing)
        if identity == "i":
            raise SourceError(
                f"table {table} has REPLICA IDENTITY USING INDEX on an index without "
                f"{what}, so PostgreSQL would not log the cache key of deleted and updated "
                f"rows: run ALTER TABLE {sql_name} REPLICA IDENTITY FULL (or DEFAULT)"
            )
        if identity == "n":
            raise SourceError(
                f"table {table} has REPLICA IDENTITY NOTHING, so PostgreSQL logs no key of "
                f"deleted and updated rows: run ALTER TABLE {sql_name} REPLICA IDENTITY "
                "DEFAULT (or FULL)"
            )
        raise SourceError(
            f"table {table} is keyed by {what}, which is not its primary key, and "
            "PostgreSQL logs only the key of deleted and updated rows: run ALTER TABLE "
            f"{sql_name} REPLICA IDENTITY FULL"
        )

    def _full(self, table: str) -> str:
        """`users` -> `public.users`: a bare name is in the default schema."""
        return table if "." in table else f"{self.default_schema}.{table}"

    @contextlib.contextmanager
    def _one_line(self) -> Iterator[None]:
        """Any other database error, as one line (a failed check, a missing privilege)."""
        try:
            yield
        except psycopg2.OperationalError as exc:
            self.close()
            raise SourceError(f"lost the connection to {self.where}: {first_line(exc)}") from None
        except psycopg2.Error as exc:
            raise SourceError(f"{self.where}: {first_line(exc)}") from None

    def _connection(self) -> Any:
        if self._sql is None or self._sql.closed:
            try:
                self._sql = psycopg2.connect(**self._params)
            except psycopg2.Error as exc:
                raise SourceError(
                    f"cannot connect to {self.where}: {first_line(exc)}; check the URL, "
                    "that the server runs, and pg_hba.conf"
                ) from None
            self._sql.autocommit = True
        return self._sql

    def _query_all(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        try:
            with self._connection().cursor() as cursor:
                cursor.execute(sql, params)
                return list(cursor.fetchall()) if cursor.description else []
        except psycopg2.OperationalError as exc:
            self.close()
            raise SourceError(f"lost the connection to {self.where}: {first_line(exc)}") from None

    def _query(self, sql: str, params: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
        rows = self._query_all(sql, params)
        return rows[0] if rows else None

    def _check_server(self) -> None:
        level = self._query("SHOW wal_level")
        if level is None or level[0] != "logical":
            now = level[0] if level else "unknown"
            raise SourceError(
                f"wal_level is {now}; set wal_level=logical in postgresql.conf and restart "
                f"PostgreSQL ({self.where})"
            )
        role = self._query(
            "SELECT rolreplication OR rolsuper, current_user FROM pg_roles "
            "WHERE rolname = current_user"
        )
        if role is None or not role[0]:
            user = role[1] if role else self._params.get("user", "?")
            raise SourceError(
                f"role {user} may not read the change log of {self.where}: "
                f"ALTER ROLE {ident(user)} WITH REPLICATION (as a superuser)"
            )

    def _ensure_publication(self) -> list[str]:
        """Create the publication, or check and extend an existing one, idempotently;
        the followed tables it did not publish until now.

        Partitioned tables are published through their root
        (publish_via_partition_root): otherwise their changes arrive under the
        partitions' names, and a partition created later would not be followed.
        """
        tables = [qualified(t) for t in self._tables]
        if not tables:
            raise SourceError(f"{self.where}: no table to follow (watch() was not called)")
        name = ident(self.publication)
        fix = (
            f"let the follower's role own the tables, or as their owner run CREATE "
            f"PUBLICATION {name} FOR TABLE {', '.join(tables)} WITH "
            "(publish_via_partition_root = true)"
        )
        try:
            found = self._query(
                "SELECT puballtables, pubinsert AND pubupdate AND pubdelete, pubtruncate, "
                "pubviaroot FROM pg_publication WHERE pubname = %s",
                (self.publication,),
            )
            if found is None:
                self._query_all(
                    f"CREATE PUBLICATION {name} FOR TABLE {', '.join(tables)} "
                    "WITH (publish_via_partition_root = true)"
                )
                log.info(
                    "seawall follow: created publication %s for %s",
                    self.publication,
                    ", ".join(self._tables),
                )
                return list(self._tables)
            all_tables, rows, truncate, via_root = found
            if not rows or not truncate:
                raise SourceError(
                    f"publication {self.publication} in {self.where} does not publish every "
                    "insert, update, delete and truncate, so changes would be lost: run "
                    f"ALTER PUBLICATION {name} SET (publish = 'insert, update, delete, "
                    "truncate')"
                )
            partitioned = [t for t in self._tables if self._is_partitioned(t)]
            if partitioned and not via_root:
                self._query_all(f"ALTER PUBLICATION {name} SET (publish_via_partition_root = true)")
                log.info(
                    "seawall follow: publication %s now publishes %s through the partition root",
                    self.publication,
                    ", ".join(partitioned),
                )
            if all_tables:
                return []
            missing = [t for t in self._tables if not self._published(t)]
            if missing:
                self._query_all(
                    f"ALTER PUBLICATION {name} ADD TABLE "
                    + ", ".join(qualified(t) for t in missing)
                )
                log.info(
                    "seawall follow: added %s to publication %s",
                    ", ".join(missing),
                    self.publication,
                )
            return missing
        except psycopg2.errors.InsufficientPrivilege as exc:
            raise SourceError(
                f"cannot create or change publication {self.publication} in {self.where} "
                f"({first_line(exc)}): {fix}"
            ) from None
        except psycopg2.Error as exc:
            raise SourceError(
                f"cannot set up publication {self.publication} in {self.where} "
                f"({first_line(exc)}): {fix}"
            ) from None

    def _is_partitioned(self, table: str) -> bool:
        row = self._query(
            "SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", (qualified(table),)
        )
        return row is not None and row[0] == "p"

    def _published(self, table: str) -> bool:
        """Whether the publication names `table` itself, or its schema (FOR TABLES IN
        SCHEMA, PostgreSQL 15+): a partitioned table's partitions do not count."""
        named = self._query(
            "SELECT 1 FROM pg_publication_rel r JOIN pg_publication p ON p.oid = r.prpubid "
            "WHERE p.pubname = %s AND r.prrelid = to_regclass(%s)",
            (self.publication, qualified(table)),
        )
        if named is not None:
            return True
        schema = self._query(
            "SELECT to_regclass('pg_catalog.pg_publication_namespace') IS NOT NULL"
        )
        if schema is None or not schema[0]:
            return False
        return (
            self._query(
                "SELECT 1 FROM pg_publication_namespace n JOIN pg_publication p "
                "ON p.oid = n.pnpubid JOIN pg_class c ON c.relnamespace = n.pnnspid "
                "WHERE p.pubname = %s AND c.oid = to_regclass(%s)",
                (self.publication, qualified(table)),
            )
            is not None
        )

    def _take_over(self, pid: int) -> None:
        """The slot is still streamed to a previous follower. We were elected, so that one
        is dead (its server process ends when its connection drops) or deposed (paused
        past its lease): give it a moment, then end its server process."""
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            if (
                self._query(
                    _SLOT_ACTIVE,
                    (self.slot,),
                )
                is None
            ):
                return
            time.sleep(0.05)
        log.warning(
            "seawall follow: slot %s is still streamed to server process %s (a deposed "
            "follower); ending that process",
            self.slot,
            pid,
        )
        self._query_all("SELECT pg_terminate_backend(%s)", (pid,))
        deadline = time.monotonic() + 5.0
        while (
            time.monotonic() < deadline
            and self._query(
                _SLOT_ACTIVE,
                (self.slot,),
            )
            is not None
        ):
            time.sleep(0.05)

    def _ensure_slot(self) -> int | None:
        """The slot's confirmed position once no one else streams it; None when it did
        not exist and was created now."""
        slot = self._query(
            "SELECT plugin, database, active_pid FROM pg_replication_slots WHERE slot_name = %s",
            (self.slot,),
        )
        if slot is not None:
            if slot[0] != "pgoutput" or slot[1] != self.dbname:
                raise SourceError(
                    f"replication slot {self.slot} exists for plugin {slot[0]} on database "
                    f"{slot[1]}; pick another name with ?slot=NAME in the URL"
                )
            if slot[2] is not None:
                self._take_over(slot[2])
            confirmed = self._query(
                "SELECT confirmed_flush_lsn - '0/0'::pg_lsn FROM pg_replication_slots "
                "WHERE slot_name = %s",
                (self.slot,),
            )
            return int(confirmed[0]) if confirmed and confirmed[0] is not None else 0
        try:
            self._query_all(
                "SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (self.slot,)
            )
        except psycopg2.Error as exc:
            raise SourceError(
                f"cannot create replication slot {self.slot} in {self.where}: {first_line(exc)}"
            ) from None
        log.info(
            "seawall follow: created replication slot %s in %s (drop it with "
            "SELECT pg_drop_replication_slot('%s') when you stop following for good: "
            "a slot nobody reads keeps WAL forever)",
            self.slot,
            self.where,
            self.slot,
        )
        return None
