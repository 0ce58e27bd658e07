"""Fixtures of the change-log follower tests: a fresh database per test, a follower."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

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
    stopped after the test.

    A plain client is copied for the follower (same server, same settings): the tests
    close their clients when they end, which is before the follower stops, and a client
    closed under a running follower fails its next call inside redis-py (a fresh-clone run
    saw a TypeError from a pooled connection whose socket had just been closed)."""
    started: list[tuple[Follower, threading.Thread, Any]] = []

    def start(source: str, client: Any, maps: list[str], **kwargs: Any) -> Follower:
        own = _own_client(client)
        follower = Follower(source, own, maps, **kwargs)
        thread = threading.Thread(target=follower.run, daemon=True)
        thread.start()
        started.append((follower, thread, own if own is not client else None))
        return follower

    yield start
    for follower, _thread, _own in started:
        follower.stop()
    for _follower, thread, own in started:
        thread.join(10)
        if own is not None and not thread.is_alive():
            own.close()


def _own_client(client: Any) -> Any:
    """A client of the follower's own, to the server `client` talks to (a Cluster client,
    which tests never close early, is shared)."""
    if type(client) is not redis.Redis:
        return client
    pool = client.connection_pool
    return redis.Redis(
        connection_pool=redis.ConnectionPool(
            connection_class=pool.connection_class, **pool.connection_kwargs
        )
    )
