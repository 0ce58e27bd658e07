"""seawall.sqlalchemy against the database itself: a seeded random workload of ORM and
Core reads and writes in two processes, through three QueryCaches of one namespace (in
this process one with an L1 and one without, in a spawned process one with an L1), with
relationships loaded lazily, by selectinload and by joinedload, gets by key, bulk and
textual writes, savepoints and rollbacks, a session that keeps its objects across other
sessions' commits, sessions of a tenant (SQLAlchemy's with_loader_criteria recipe, added
by a listener after attach()), and a self-referential tree loaded two levels deep. After
every cached read in a fresh session, in either process, the same statement runs uncached
here, and the two must agree. The workload is in tests/sqladiff.py.

A few fixed seeds run here; `python3 scripts/dev.py soak sqla` (SEAWALL_DIFF_OPS=10000)
runs a longer workload. A difference found becomes a fixed seed."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator
from typing import Any

import pytest
from sqladiff import Peer, World, run_steps
from sqladiffmodels import Employee, add_rows, make_engine
from sqlalchemy import create_engine, select
from sqlalchemy.orm import aliased, sessionmaker, with_polymorphic
from sqlaworkers import Base, Counter, User, seed

from seawall.sqlalchemy import QueryCache, cached

OPS = int(os.environ.get("SEAWALL_DIFF_OPS", "250"))


@pytest.fixture(scope="module")
def peer(seawall_server: Any) -> Iterator[Peer]:
    """The second process of every workload of this module."""
    started = Peer(multiprocessing.get_context("spawn"), seawall_server.url)
    yield started
    started.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[str]:
    if request.param == "postgresql":
        yield request.getfixturevalue("pg_url")
        return
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    engine = create_engine(url)
    Base.metadata.create_all(engine)
    with sessionmaker(engine)() as session:
        seed(session)
    engine.dispose()
    yield url


@pytest.mark.parametrize("seed_value", [1, 2, 3])
def test_cached_reads_agree_with_the_database(
    db_url: str, standalone: Any, peer: Peer, seed_value: int
) -> None:
    add_rows(db_url)
    # One namespace per workload: the peer process outlives a test's FLUSHALL.
    namespace = f"diff{seed_value}{db_url.split(':')[0].split('+')[0]}"
    local = World(
        db_url, standalone.sync(), standalone.sync(), namespace, [{}, {"l1_size": 0, "hot_keys": 0}]
    )
    peer.call("open", db_url, namespace)
    try:
        compared = run_steps(local, peer, seed_value, OPS)
    finally:
        peer.call("shut")
        local.close()
    # The figures of a run, shown by pytest -rP (`python3 scripts/dev.py soak sqla -rP`).
    print(
        f"seed {seed_value}: {OPS} operations, {sum(compared.values())} cached reads "
        f"compared ({compared['peer']} in the second process), 0 differences"
    )
    assert sum(compared.values()) > OPS // 3
    assert compared["peer"] > OPS // 10


def described(row: Any) -> Any:
    return [(type(entity).__name__, entity.id, entity.name) for entity in row]


def test_an_unnamed_aliased_entity_is_cached(db_url: str, standalone: Any) -> None:
    """Found by the workload: select(with_polymorphic(...)) or select(aliased(User)) with
    cached() raised IndexError (their result's key, None, is left out of its keys view),
    and a hit on a result holding classes of two declarative bases raised LookupError
    (only the registry of the statement's first entity was looked in)."""
    add_rows(db_url)
    engine = make_engine(db_url)
    factory = sessionmaker(engine)
    QueryCache(standalone.sync(), "aliased").attach(factory)
    counter = Counter(engine)
    everyone = with_polymorphic(Employee, "*")
    person = aliased(User)
    for query in (
        select(everyone).order_by(everyone.id),
        select(person).order_by(person.id),
        select(person, everyone).join(everyone, everyone.id == person.id),
    ):
        with factory() as session:
            expected = [described(row) for row in session.execute(query).all()]
            expected_keys = list(session.execute(query).keys())
        for attempt in ("miss", "hit"):
            with factory() as session:
                counter.take()
                result = session.execute(query.options(cached()))
                assert [described(row) for row in result.all()] == expected
                assert list(result.keys()) == expected_keys
                if attempt == "hit":
                    assert counter.take() == 0, "served from the cache"
    engine.dispose()
