"""The database side of the sink tests: where the rows are, read back without seawall."""

from __future__ import annotations

import sqlite3
import uuid
from typing import Any


class Database:
    """A SQLite path or a SQLAlchemy URL, and a table name private to one test."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.sqlite = "://" not in url
        self.table = f"t_{uuid.uuid4().hex[:12]}"
        self.extra_tables: list[str] = []
        self._engine: Any = None

    @property
    def name(self) -> str:
        return "sqlite" if self.sqlite else self.url.split(":", 1)[0]

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        if self.sqlite:
            with sqlite3.connect(self.url, timeout=30) as conn:
                return [tuple(row) for row in conn.execute(sql).fetchall()]
        with self.engine().connect() as conn:
            from sqlalchemy import text

            return [tuple(row) for row in conn.execute(text(sql)).all()]

    def engine(self) -> Any:
        if self._engine is None:
            import sqlalchemy

            self._engine = sqlalchemy.create_engine(self.url)
        return self._engine

    def rows(self, table: str | None = None) -> list[tuple[Any, ...]]:
        """(stock, order_id, qty, cancelled) of every row."""
        return self.query(
            f"SELECT stock, order_id, qty, cancelled FROM {table or self.table} "
            "ORDER BY stock, order_id"
        )

    def count(self, table: str | None = None) -> int:
        return int(self.query(f"SELECT COUNT(*) FROM {table or self.table}")[0][0])

    def drop(self) -> None:
        for table in [self.table, *self.extra_tables]:
            if self.sqlite:
                with sqlite3.connect(self.url, timeout=30) as conn:
                    conn.execute(f"DROP TABLE IF EXISTS {table}")
            else:
                from sqlalchemy import text

                with self.engine().begin() as conn:
                    conn.execute(text(f"DROP TABLE IF EXISTS {table}"))
        if self._engine is not None:
            self._engine.dispose()
