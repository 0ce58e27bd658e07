"""A database of its own on the session's private MariaDB, as the follower tests see it.

Same methods as PostgresDatabase, so the follower's tests run over both: `url` for
`seawall follow`, `execute` in autocommit (BEGIN ... COMMIT as separate calls make a
transaction), `kill` and `restart` of the server underneath.
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

import pymysql

from seawall.launcher._mariadb import MariaDBProcess


class MariaDBDatabase:
    kind = "mariadb"

    def __init__(self, server: MariaDBProcess, name: str | None = None) -> None:
        self.server = server
        self.name = name or f"t_{uuid.uuid4().hex[:12]}"
        self._conn: Any = None

    @classmethod
    def fresh(cls, server: MariaDBProcess) -> MariaDBDatabase:
        """A new, empty database (the server restarted first if a test left it down)."""
        if not server.running:
            server.restart()
        database = cls(server)
        database.admin(f"CREATE DATABASE `{database.name}`")
        return database

    @property
    def url(self) -> str:
        return self.server.url(self.name)

    def connect(self, database: str | None = "") -> Any:
        """A new autocommit PyMySQL connection to this database; the caller closes it."""
        return pymysql.connect(
            host=self.server.host,
            port=self.server.port,
            user="root",
            database=self.name if database == "" else database,
            autocommit=True,
            connect_timeout=5,
        )

    def execute(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """Run one statement in autocommit on this database; its rows, if any."""
        if self._conn is None:
            self._conn = self.connect()
        with self._conn.cursor() as cursor:
            cursor.execute(sql, params or None)
            return list(cursor.fetchall())

    def admin(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """Run one statement on a connection of its own, with no current database."""
        conn = self.connect(None)
        try:
            with conn.cursor() as cursor:
                cursor.execute(sql, params or None)
                return list(cursor.fetchall())
        finally:
            conn.close()

    def kill(self) -> None:
        """SIGKILL the server (its data stays); connections are dropped."""
        self._close()
        self.server.kill()

    def restart(self) -> None:
        """Start the server again on the same port and datadir."""
        self._close()
        self.server.restart()

    def drop(self) -> None:
        if not self.server.running:
            self.server.restart()
        self._close()
        self.admin(f"DROP DATABASE IF EXISTS `{self.name}`")

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(pymysql.Error):
                conn.close()
