"""The orders table: SQLite through the stdlib, PostgreSQL and MySQL/MariaDB through SQLAlchemy.

Every write is idempotent and keyed by (stock, order id), so replaying a batch after a
crash (saved but not acknowledged) changes nothing:
- a take inserts the row unless it exists (a row already cancelled stays cancelled);
- a cancel inserts the row as cancelled, or marks the existing row cancelled. A cancel
  that reaches the table before its take (the take pending on a dead consumer) therefore
  still ends with one cancelled row.
A batch is one transaction, so a batch is saved whole or not at all.

The calls here block; the asyncio sink runs them in a worker thread.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from seawall._orders import OrderChange

Dialect = Literal["sqlite", "postgresql", "mysql"]

DEFAULT_TABLE = "seawall_orders"
# Letters, digits, underscores: a table name goes into SQL text, so nothing else is let in.
_TABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
# 191 characters of utf8mb4 keep MySQL's older index-size limit happy; Stock.take accepts
# no longer order id (in bytes, so in characters too), and OrderSink no longer stock name.
KEY_CHARS = 191


def check_table_name(table: Any) -> str:
    if not isinstance(table, str) or not _TABLE_NAME.fullmatch(table):
        raise ValueError(
            f"table name must be 1-63 letters, digits or underscores, not starting with a "
            f"digit; got {table!r}"
        )
    return table


def create_sql(table: str) -> str:
    return (
        f"CREATE TABLE IF NOT EXISTS {table} ("
        f"stock VARCHAR({KEY_CHARS}) NOT NULL, "
        f"order_id VARCHAR({KEY_CHARS}) NOT NULL, "
        "qty INTEGER NOT NULL, "
        "cancelled SMALLINT NOT NULL DEFAULT 0, "
        "saved_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP, "
        "PRIMARY KEY (stock, order_id))"
    )


def upsert_sql(table: str, dialect: Dialect, *, cancel: bool) -> str:
    """The idempotent write of one take (cancel=False) or cancel, with named parameters."""
    insert = (
        f"INSERT INTO {table} (stock, order_id, qty, cancelled) "
        f"VALUES (:stock, :order_id, :qty, {1 if cancel else 0})"
    )
    if dialect == "mysql":
        # Not INSERT IGNORE: that would also turn real errors (a too-long id) into warnings.
        action = "cancelled = 1" if cancel else "order_id = order_id"
        return f"{insert} ON DUPLICATE KEY UPDATE {action}"
    action = "DO UPDATE SET cancelled = 1" if cancel else "DO NOTHING"
    return f"{insert} ON CONFLICT (stock, order_id) {action}"


def unnest_sql(table: str, *, cancel: bool) -> str:
    """PostgreSQL: a whole batch as one statement over two arrays, instead of one
    statement per row (executemany); several times faster for batches of hundreds."""
    action = "DO UPDATE SET cancelled = 1" if cancel else "DO NOTHING"
    return (
        f"INSERT INTO {table} (stock, order_id, qty, cancelled) "
        f"SELECT :stock, batch.order_id, batch.qty, {1 if cancel else 0} "
        "FROM unnest(CAST(:order_ids AS VARCHAR[]), CAST(:qtys AS INTEGER[])) "
        "AS batch(order_id, qty) "
        f"ON CONFLICT (stock, order_id) {action}"
    )


def _unique(changes: Iterable[OrderChange]) -> list[OrderChange]:
    """One change per order id: one statement may not touch a row twice (PostgreSQL's
    ON CONFLICT DO UPDATE refuses it); within one kind the first is as good as any."""
    return list({change.order_id: change for change in reversed(list(changes))}.values())


def _params(stock: str, changes: Iterable[OrderChange]) -> list[dict[str, Any]]:
    return [{"stock": stock, "order_id": c.order_id, "qty": c.qty} for c in changes]


class OrderTable:
    """One orders table in one database; `open_table` picks the implementation."""

    dialect: Dialect
    table: str
    where: str  # the database, for error messages (no password)

    def apply(self, stock: str, changes: Sequence[OrderChange]) -> None:
        """Write `changes` in one transaction: takes first, then cancels (order-safe,
        since a cancel always wins over a take of the same order)."""
        raise NotImplementedError

    def saved(self, stock: str) -> dict[str, tuple[int, bool]]:
        """order id -> (qty, cancelled) for every saved row of `stock`."""
        raise NotImplementedError

    def count(self, stock: str | None = None, *, cancelled: bool | None = False) -> int:
        """Rows (of `stock`, or all), not cancelled by default; cancelled=None counts all."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def _count_sql(self, stock: str | None, cancelled: bool | None) -> tuple[str, dict[str, Any]]:
        clauses, params = [], {}
        if stock is not None:
            clauses.append("stock = :stock")
            params["stock"] = stock
        if cancelled is not None:
            clauses.append(f"cancelled = {1 if cancelled else 0}")
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        return f"SELECT COUNT(*) FROM {self.table}{where}", params


class SQLiteTable(OrderTable):
    def __init__(self, path: str | os.PathLike[str], table: str) -> None:
        self.dialect = "sqlite"
        self.table = check_table_name(table)
        self.where = str(path)
        # Several sink processes may share one file: wait for the write lock instead of
        # failing at once, and use WAL so readers never block the writer.
        self._db = sqlite3.connect(
            str(path), timeout=60.0, isolation_level=None, check_same_thread=False
        )
        self._mutex = threading.Lock()  # the asyncio sink calls in from worker threads
        with self._mutex:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(create_sql(self.table))
        self._take = upsert_sql(self.table, "sqlite", cancel=False)
        self._cancel = upsert_sql(self.table, "sqlite", cancel=True)

    def apply(self, stock: str, changes: Sequence[OrderChange]) -> None:
        takes = _params(stock, (c for c in changes if not c.cancelled))
        cancels = _params(stock, (c for c in changes if c.cancelled))
        with self._mutex:
            # IMMEDIATE takes the write lock up front: no deadlock between two upgraders.
            self._db.execute("BEGIN IMMEDIATE")
            try:
                if takes:
                    self._db.executemany(self._take, takes)
                if cancels:
                    self._db.executemany(self._cancel, cancels)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def saved(self, stock: str) -> dict[str, tuple[int, bool]]:
        with self._mutex:
            rows = self._db.execute(
                f"SELECT order_id, qty, cancelled FROM {self.table} WHERE stock = ?", (stock,)
            ).fetchall()
        return {order_id: (int(qty), bool(cancelled)) for order_id, qty, cancelled in rows}

    def count(self, stock: str | None = None, *, cancelled: bool | None = False) -> int:
        sql, params = self._count_sql(stock, cancelled)
        with self._mutex:
            return int(self._db.execute(sql, params).fetchone()[0])

    def close(self) -> None:
        with self._mutex:
            self._db.close()


class SQLAlchemyTable(OrderTable):
    def __init__(self, url: str, table: str) -> None:
        try:
            import sqlalchemy
            import sqlalchemy.exc
        except ImportError as exc:
            raise ImportError(
                f"an OrderSink on {url.split(':', 1)[0]} needs SQLAlchemy: "
                "pip install 'seawall[postgresql]' (or 'seawall[mysql]')"
            ) from exc
        self._sa = sqlalchemy
        self.table = check_table_name(table)
        try:
            self._engine = sqlalchemy.create_engine(url, pool_pre_ping=True)
        except sqlalchemy.exc.NoSuchModuleError as exc:
            raise ValueError(
                f"OrderSink supports PostgreSQL, MySQL/MariaDB and SQLite, not "
                f"{url.split('://', 1)[0]!r}: use 'postgresql+psycopg://...', "
                "'mysql+pymysql://...' or a SQLite file path"
            ) from exc
        except ImportError as exc:  # the driver named in the URL is missing
            raise ImportError(
                f"the database driver for {url.split('://', 1)[0]} is missing ({exc}): "
                "pip install 'seawall[postgresql]' for PostgreSQL (psycopg) or "
                "'seawall[mysql]' for MySQL/MariaDB (PyMySQL)"
            ) from exc
        self.where = self._engine.url.render_as_string(hide_password=True)
        name = self._engine.dialect.name
        if name == "postgresql":
            self.dialect = "postgresql"
        elif name == "sqlite":
            self.dialect = "sqlite"
        elif name in ("mysql", "mariadb"):
            self.dialect = "mysql"
        else:
            raise ValueError(
                f"OrderSink supports PostgreSQL, MySQL/MariaDB and SQLite, not {name!r} "
                f"({self.where})"
            )
        text = sqlalchemy.text
        with self._engine.begin() as conn:
            conn.execute(text(create_sql(self.table)))
        self._take = text(upsert_sql(self.table, self.dialect, cancel=False))
        self._cancel = text(upsert_sql(self.table, self.dialect, cancel=True))
        self._take_all = text(unnest_sql(self.table, cancel=False))
        self._cancel_all = text(unnest_sql(self.table, cancel=True))

    def apply(self, stock: str, changes: Sequence[OrderChange]) -> None:
        takes = [c for c in changes if not c.cancelled]
        cancels = [c for c in changes if c.cancelled]
        with self._engine.begin() as conn:
            if self.dialect == "postgresql":
                for statement, part in ((self._take_all, takes), (self._cancel_all, cancels)):
                    if part:
                        unique = _unique(part)
                        conn.execute(
                            statement,
                            {
                                "stock": stock,
                                "order_ids": [c.order_id for c in unique],
                                "qtys": [c.qty for c in unique],
                            },
                        )
                return
            if takes:
                conn.execute(self._take, _params(stock, takes))
            if cancels:
                conn.execute(self._cancel, _params(stock, cancels))

    def saved(self, stock: str) -> dict[str, tuple[int, bool]]:
        sql = self._sa.text(
            f"SELECT order_id, qty, cancelled FROM {self.table} WHERE stock = :stock"
        )
        with self._engine.connect() as conn:
            rows = conn.execute(sql, {"stock": stock}).all()
        return {str(row[0]): (int(row[1]), bool(row[2])) for row in rows}

    def count(self, stock: str | None = None, *, cancelled: bool | None = False) -> int:
        sql, params = self._count_sql(stock, cancelled)
        with self._engine.connect() as conn:
            return int(conn.execute(self._sa.text(sql), params).scalar_one())

    def close(self) -> None:
        self._engine.dispose()


def open_table(database: Any, table: str = DEFAULT_TABLE) -> OrderTable:
    """An `OrderTable` for `database`: a SQLite path, or a SQLAlchemy URL ("dialect://...").

    The table is created if missing.
    """
    if isinstance(database, OrderTable):
        return database
    if isinstance(database, Path) or (isinstance(database, str) and "://" not in database):
        if not str(database):
            raise ValueError("database must be a SQLite path or a SQLAlchemy URL, got ''")
        return SQLiteTable(database, table)
    if isinstance(database, str):
        return SQLAlchemyTable(database, table)
    raise TypeError(
        "database must be a SQLite path (str or pathlib.Path) or a SQLAlchemy URL such as "
        f"'postgresql+psycopg://user@host/db', got {type(database).__qualname__}"
    )


def row_errors(table: OrderTable) -> tuple[type[BaseException], ...]:
    """Errors a row's own content may cause (a value too long or of bytes the database
    refuses, a constraint it breaks): the same row fails again however often it is retried,
    unlike an outage or a mistake in the SQL."""
    if isinstance(table, SQLAlchemyTable):
        import sqlalchemy.exc

        return (sqlalchemy.exc.DataError, sqlalchemy.exc.IntegrityError)
    return (sqlite3.DataError, sqlite3.IntegrityError)


def transient_errors(table: OrderTable) -> tuple[type[BaseException], ...]:
    """Errors worth retrying: the database is unreachable or busy, not the SQL wrong."""
    if isinstance(table, SQLAlchemyTable):
        import sqlalchemy.exc

        return (sqlalchemy.exc.OperationalError, sqlalchemy.exc.InterfaceError)
    return (sqlite3.OperationalError,)
