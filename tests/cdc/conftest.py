"""Fixtures of the change-log follower tests: a fresh database per test, a follower."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from cdc.databases import PostgresDatabase
from cdc.mariadb_database import MariaDBDatabase
from seawall.cdc import Follower
from seawall.launcher._postgres import PostgresProcess

USERS = "CREATE TABLE users (id INT PRIMARY KEY, email VARCHAR(200) UNIQUE, name VARCHAR(200))"


@pytest.fixture
def pg_database(seawall_postgres: PostgresProcess) -> Iterator[PostgresDatabase]:
    """A fresh PostgreSQL database with a `users (id, email, name)` table."""
    if not seawall_postgres.running:
        seawall_postgres.restart()
    db = PostgresDatabase.fresh(seawall_postgres)
    db.execute(USERS)
    yield db
    db.drop()


@pytest.fixture(params=["postgresql", "mariadb"])
def database(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The same fresh `users` table on each source the follower reads: the follower's
    own behaviour is tested once per source."""
    if request.param == "postgresql":
        yield request.getfixturevalue("pg_database")
        return
    db = MariaDBDatabase.fresh(request.getfixturevalue("seawall_mariadb"))
    db.execute(USERS)
    yield db
    db.drop()


@pytest.fixture
def run_follower() -> Iterator[Callable[..., Follower]]:
    """``run_follower(source_url, client, maps, **kw)``: a Follower running in a thread,
    stopped after the test."""
    started: list[tuple[Follower, threading.Thread]] = []

    def start(source: str, client: Any, maps: list[str], **kwargs: Any) -> Follower:
        follower = Follower(source, client, maps, **kwargs)
        thread = threading.Thread(target=follower.run, daemon=True)
        thread.start()
        started.append((follower, thread))
        return follower

    yield start
    for follower, _thread in started:
        follower.stop()
    for _follower, thread in started:
        thread.join(10)
