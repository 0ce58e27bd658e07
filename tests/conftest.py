"""Shared fixtures of seawall's own suite; the servers come from the seawall.testing plugin."""

from __future__ import annotations

import gc
import itertools
import multiprocessing
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis.cluster
from browsers import chromium  # noqa: F401  (the fixture: a headless Chromium)
from lockworkers import async_client, sync_client


@pytest.fixture(autouse=True)
def _forget_django_caches(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a seawall.django test, drop the clients and caches its process keeps for
    every later cache instance (seawall.django._local): their background work (the second
    deletes' sweeper looks at its schedule every 0.5 s) would otherwise go on for the
    rest of the worker's tests, on servers whose commands other tests count."""
    yield
    local = sys.modules.get("seawall.django._local")
    if local is not None and request.node.module.__name__.startswith("test_django"):
        local._shared.clear()
        gc.collect()


SPAWN = multiprocessing.get_context("spawn")


@dataclass
class Target:
    """A server topology under test: one server, or the 3+3 cluster."""

    url: str
    cluster: bool
    _clients: list[Any] = field(default_factory=list)

    def sync(self, **kwargs: Any) -> Any:
        client = sync_client(self.url, self.cluster, **kwargs)
        self._clients.append(client)
        return client

    def aio(self, **kwargs: Any) -> Any:
        """An asyncio client; create it inside the running loop and close it there."""
        return async_client(self.url, self.cluster, **kwargs)

    def keys(self, pattern: str = "seawall:*") -> list[str]:
        admin = self.sync()
        if self.cluster:
            found = admin.keys(pattern, target_nodes=redis.cluster.RedisCluster.PRIMARIES)
        else:
            found = admin.keys(pattern)
        return sorted(k.decode() for k in found)

    def lock_keys(self) -> list[str]:
        """Keys a lock leaves behind, other than its fence counter, its memory of released
        tokens (which makes a retried release idempotent) and a Lock's queue marker. They
        outlive a hold on purpose but expire by themselves (the counter a day after it was
        made, the memory minutes or a lease after a release, the marker seconds after the
        last queueing): checked here, so no test leaves a key that never expires."""
        admin = self.sync()
        left = []
        for key in self.keys():
            if key.endswith((":fence", ":released", ":queued")) or ":released:" in key:
                assert admin.pttl(key) != -1, f"{key} never expires"  # -2: gone since
            else:
                left.append(key)
        return left

    def close(self) -> None:
        for client in self._clients:
            client.close()


@pytest.fixture
def standalone(seawall_server: Any) -> Iterator[Target]:
    target = Target(seawall_server.url, cluster=False)
    target.sync().flushall()
    yield target
    target.close()


@pytest.fixture(params=["standalone", "cluster"])
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    if request.param == "standalone":
        server = request.getfixturevalue("seawall_server")
        target = Target(server.url, cluster=False)
        target.sync().flushall()
    else:
        group = request.getfixturevalue("seawall_cluster")
        group.flushall()
        target = Target(group.url, cluster=True)
    yield target
    target.close()


@pytest.fixture(params=["sync", "async"])
def world(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
def process_pool() -> Iterator[Any]:
    """Eight warm processes from the fork server (tests/forked.py), shared by the tests
    that sell stock from many processes: started once, and each forked with seawall
    imported, instead of spawned and importing it (a CPU-second each)."""
    import stockworkers
    from forked import FORKSERVER

    with FORKSERVER.Pool(8, initializer=stockworkers.warm) as pool:
        yield pool


# Database-backed tests (OrderSink, claim_message) run on SQLite always, and also on the
# server named by DATABASE_URL (a SQLAlchemy URL, e.g. PostgreSQL) when it is set.
DATABASES = ["sqlite"] + (["url"] if os.environ.get("DATABASE_URL") else [])


@pytest.fixture(params=DATABASES)
def database(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Any]:
    """A `sinkdb.Database`: a SQLite file in tmp_path or DATABASE_URL, with a table name
    of its own (dropped afterwards) so parallel runs never share rows."""
    from sinkdb import Database

    if request.param == "sqlite":
        db = Database(str(tmp_path / "orders.db"))
    else:
        db = Database(os.environ["DATABASE_URL"])
    yield db
    db.drop()


_databases = itertools.count()


@pytest.fixture
def pg_url(seawall_postgres: Any) -> Iterator[str]:
    """A fresh database on the session's PostgreSQL, seeded with sqlaworkers' rows; its
    SQLAlchemy URL (psycopg 3)."""
    import psycopg
    from sqlalchemy import create_engine
    from sqlalchemy.orm import sessionmaker
    from sqlaworkers import Base, seed

    if not seawall_postgres.running:
        seawall_postgres.restart()
    name = f"qc{os.getpid()}_{next(_databases)}"
    with psycopg.connect(seawall_postgres.dsn(), autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    url = f"postgresql+psycopg://postgres@{seawall_postgres.host}:{seawall_postgres.port}/{name}"
    engine = create_engine(url)
    Base.metadata.create_all(engine)
    with sessionmaker(engine)() as session:
        seed(session)
    engine.dispose()
    yield url
    with psycopg.connect(seawall_postgres.dsn(), autocommit=True) as admin:
        admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[str]:
    """A database seeded with sqlaworkers' rows, on SQLite and on PostgreSQL (`pg_url`): its
    SQLAlchemy URL. A test module may define its own (other tables, other seeds)."""
    if request.param == "postgresql":
        yield request.getfixturevalue("pg_url")
        return
    from sqlalchemy import create_engine
    from sqlalchemy.orm import sessionmaker
    from sqlaworkers import Base, seed

    url = f"sqlite:///{tmp_path / 'shop.db'}"
    engine = create_engine(url)
    Base.metadata.create_all(engine)
    with sessionmaker(engine)() as session:
        seed(session)
    engine.dispose()
    yield url
