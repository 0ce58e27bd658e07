"""Exactly once for a database write: the write and its dedupe row in one SQL transaction.

`Idempotent` runs a handler at most once per message while leases hold; a claimant that
stalls past its lease, or a Redis that loses its record, lets a second run happen. When the
handler's effect is a write to the same SQL database, the database itself can make it
exactly once: insert a row keyed by the message id in the transaction that does the write.
The second delivery's insert conflicts (PostgreSQL and MySQL make it wait for the first
transaction, then see the row; SQLite serialises writers), so it writes nothing:

    with engine.begin() as conn:                      # or a sqlite3 connection
        if seawall.claim_message(conn, message.id, namespace="payments"):
            conn.execute(insert_payment, ...)         # runs at most once, ever
    # commit: the payment and the dedupe row exist together, or neither does

Works with a sqlite3.Connection (inside a transaction the caller opened), a SQLAlchemy
Connection or Session. With asyncio SQLAlchemy: `await conn.run_sync(claim_message, ...)`.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from seawall.stock._sql import check_table_name

DEFAULT_PROCESSED_TABLE = "seawall_processed"


def _dialect(conn: Any) -> str:
    if isinstance(conn, sqlite3.Connection):
        return "sqlite"
    dialect = getattr(conn, "dialect", None)  # SQLAlchemy Connection
    if dialect is None and hasattr(conn, "get_bind"):  # SQLAlchemy Session
        dialect = conn.get_bind().dialect
    if dialect is None:
        raise TypeError(
            "claim_message needs a sqlite3.Connection or a SQLAlchemy Connection or Session, "
            f"got {type(conn).__qualname__}"
        )
    name = str(dialect.name)
    return "mysql" if name == "mariadb" else name


def _execute(conn: Any, sql: str, params: dict[str, Any]) -> int:
    if isinstance(conn, sqlite3.Connection):
        return conn.execute(sql, params).rowcount
    from sqlalchemy import text

    return int(conn.execute(text(sql), params).rowcount)


def create_processed_table(conn: Any, table: str = DEFAULT_PROCESSED_TABLE) -> None:
    """Create the dedupe table if missing (once, like a migration: on MySQL DDL commits)."""
    check_table_name(table)
    _execute(
        conn,
        f"CREATE TABLE IF NOT EXISTS {table} ("
        "namespace VARCHAR(191) NOT NULL, message_id VARCHAR(191) NOT NULL, "
        "processed_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP, "
        "PRIMARY KEY (namespace, message_id))",
        {},
    )


def claim_message(
    conn: Any,
    message_id: str | int,
    *,
    namespace: str = "",
    table: str = DEFAULT_PROCESSED_TABLE,
) -> bool:
    """Mark `message_id` processed in the caller's open transaction; False if it already was.

    True: this transaction is the first to process the message; do the write and commit
    (a rollback undoes the mark too). False: an earlier, committed transaction did;
    write nothing. Old rows may be deleted once no redelivery can come any more.
    """
    check_table_name(table)
    dialect = _dialect(conn)
    insert = f"INSERT INTO {table} (namespace, message_id) VALUES (:namespace, :message_id)"
    if dialect == "mysql":
        # Not ON DUPLICATE KEY UPDATE: with the FOUND_ROWS flag (SQLAlchemy sets it) a
        # duplicate counts as 1 row there; INSERT IGNORE counts it as 0.
        sql = insert.replace("INSERT INTO", "INSERT IGNORE INTO", 1)
    else:
        sql = f"{insert} ON CONFLICT (namespace, message_id) DO NOTHING"
    return _execute(conn, sql, {"namespace": namespace, "message_id": str(message_id)}) == 1
