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

import importlib.util
import os
import re
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from seawall.stock._orders import OrderChange

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


# A bare scheme lets SQLAlchemy pick its default driver, often one that is not installed
# (mysqlclient for mysql://) or none at all (postgres://): seawall picks an installed one.
# scheme -> (dialect, ((module to import, driver name), ...) in order of preference, extra)
_BARE_SCHEMES: dict[str, tuple[str, tuple[tuple[str, str], ...], str]] = {
    "mysql": ("mysql", (("pymysql", "pymysql"), ("MySQLdb", "mysqldb")), "mysql"),
    "mariadb": ("mariadb", (("pymysql", "pymysql"), ("MySQLdb", "mysqldb")), "mysql"),
    "postgresql": (
        "postgresql",
        (("psycopg", "psycopg"), ("psycopg2", "psycopg2")),
        "postgresql",
    ),
    "postgres": (
        "postgresql",
        (("psycopg", "psycopg"), ("psycopg2", "psycopg2")),
        "postgresql",
    ),
}
SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
_WHAT_TO_PASS = (
    "pass a database URL such as 'postgresql://user@host/db' or 'mysql://user@host/db', "
    "or a SQLite path: a file name ending in .db, .sqlite or .sqlite3 (or a "
    "'sqlite:///path' URL)"
)


def _module_importable(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def driver_url(url: str, importable: Callable[[str], bool] = _module_importable) -> str:
    """`url` with an installed driver named when it names none ("mysql://" ->
    "mysql+pymysql://"); a URL that names its driver is the user's choice and kept."""
    scheme, sep, rest = url.partition("://")
    known = _BARE_SCHEMES.get(scheme.lower())
    if not sep or known is None:
        return url
    dialect, drivers, extra = known
    for module, driver in drivers:
        if importable(module):
            return f"{dialect}+{driver}://{rest}"
    names = " or ".join(module for module, _ in drivers)
    raise ImportError(
        f"an OrderSink on {scheme}:// found no driver installed ({names}): "
        f"pip install 'seawall[{extra}]'"
    )


def open_table(database: Any, table: str = DEFAULT_TABLE) -> OrderTable:
    """An `OrderTable` for `database`: a SQLite file path (ending .db, .sqlite or .sqlite3)
    or a database URL ("postgresql://...", "mysql+pymysql://...", "sqlite:///path").

    The table is created if missing. Anything else is refused before any file is made: a
    URL missing its scheme would otherwise become a SQLite file named after it.
    """
    if isinstance(database, OrderTable):
        return database
    if isinstance(database, str) and "://" in database:
        return SQLAlchemyTable(driver_url(database), table)
    if isinstance(database, str | Path):
        if not str(database).lower().endswith(SQLITE_SUFFIXES):
            # Only what follows the last "@" is shown: a URL missing its scheme may
            # carry a password in "user:password@host".
            shown = str(database).rsplit("@", 1)[-1]
            raise ValueError(
                f"database {shown!r} is neither a database URL (no '://') nor a SQLite file "
                f"path (it does not end in .db, .sqlite or .sqlite3): {_WHAT_TO_PASS}"
            )
        return SQLiteTable(database, table)
    raise TypeError(
        f"database must be a str or pathlib.Path, got {type(database).__qualname__}: "
        f"{_WHAT_TO_PASS}"
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
