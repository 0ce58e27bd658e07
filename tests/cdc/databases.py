"""Test-side handles on a database the follower follows: a fresh database per test on a
session server. The follower tests use only this small interface (kind, url, execute,
kill, restart), so they run unchanged against every source."""

from __future__ import annotations

import itertools
import os
import time
from typing import Any

import psycopg2

from seawall.launcher._postgres import PostgresProcess

_numbers = itertools.count()


class PostgresDatabase:
    """One database (and its own slot and publication names) on the session PostgreSQL."""

    kind = "postgresql"

    def __init__(self, server: PostgresProcess, name: str) -> None:
        self.server = server
        self.name = name
        self.slot = f"{name}_slot"

    @classmethod
    def fresh(cls, server: PostgresProcess) -> PostgresDatabase:
        name = f"t{os.getpid()}_{next(_numbers)}"
        admin = cls(server, "postgres")
        admin.execute(f"CREATE DATABASE {name}")
        return cls(server, name)

    @property
    def url(self) -> str:
        """The SOURCE_URL `seawall follow` accepts."""
        return f"{self.server.url(self.name)}?slot={self.slot}&publication={self.name}_pub"

    def connect(self) -> Any:
        conn = psycopg2.connect(self.server.dsn(self.name))
        conn.autocommit = True
        return conn

    def execute(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """Run one statement in its own transaction (autocommit); the rows it returns."""
        conn = self.connect()
        try:
            with conn.cursor() as cursor:
                cursor.execute(sql, params or None)
                return list(cursor.fetchall()) if cursor.description else []
        finally:
            conn.close()

    def kill(self) -> None:
        """SIGKILL the server (every database on it), as a crash would."""
        self.server.kill()

    def restart(self) -> None:
        """Start the server again after kill() (or restart a running one)."""
        self.server.restart()

    # -- PostgreSQL specifics -----------------------------------------------------------

    def confirmed_flush(self) -> int:
        rows = self.execute(
            "SELECT confirmed_flush_lsn - '0/0'::pg_lsn FROM pg_replication_slots "
            "WHERE slot_name = %s",
            self.slot,
        )
        return int(rows[0][0]) if rows and rows[0][0] is not None else 0

    def drop(self) -> None:
        """Drop the slot (after its reader left) and the database."""
        if not self.server.running:
            self.server.restart()
        admin = PostgresDatabase(self.server, "postgres")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                admin.execute(
                    "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                    "WHERE slot_name = %s",
                    self.slot,
                )
                break
            except psycopg2.errors.ObjectInUse:
                time.sleep(0.1)
        admin.execute(f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)")
