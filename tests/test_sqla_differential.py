"""seawall.sqlalchemy against the database itself: a seeded random workload of ORM and
Core reads and writes in two processes, through three QueryCaches of one namespace (in
this process one with an L1 and one without, in a spawned process one with an L1), with
relationships loaded lazily, by selectinload and by joinedload, gets by key, joined-table
and single-table inheritance read polymorphically, tenants of rows (SQLAlchemy's
with_loader_criteria recipe, added by a listener after attach()) and of schemas
(schema_translate_map), unit-of-work, Core, bulk, textual and CTE writes, savepoints and
rollbacks, a session that keeps its objects across other sessions' commits, and a
self-referential tree loaded two levels deep. After every cached read in a fresh session,
in either process, the same statement runs uncached here, and the two must agree. The
workload is in tests/sqladiff.py (processes), sqladiffsteps.py and sqladiffmodels.py; what
it covers is listed in docs/sqlalchemy.md, "Checked against the database".

A few fixed seeds run here; `python3 scripts/dev.py soak sqla -rP` (SEAWALL_DIFF_OPS=10000)
runs a longer workload and prints its figures. A difference found becomes a fixed seed,
and a bug it finds gets a test of its own here."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator
from typing import Any

import pytest
from sqladiff import Peer, World, run_steps
from sqladiffmodels import Employee, add_rows, make_engine
from sqlalchemy import insert, literal, select
from sqlalchemy.orm import aliased, sessionmaker, with_polymorphic
from sqlaworkers import Address, Counter, User

from seawall.sqlalchemy import QueryCache, cached

OPS = int(os.environ.get("SEAWALL_DIFF_OPS", "250"))


@pytest.fixture(scope="module")
def peer(seawall_server: Any) -> Iterator[Peer]:
    """The second process of every workload of this module."""
    started = Peer(multiprocessing.get_context("spawn"), seawall_server.url)
    yield started
    started.close()


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


def test_a_write_the_driver_commits_at_once_is_invalidated(db_url: str, standalone: Any) -> None:
    """Found by the workload (seed 3, 10,000 operations, SQLite): pysqlite opens no
    transaction before `WITH picked AS (...) INSERT INTO ...` (an insert().from_select()
    reading a CTE), so the row is committed as it runs and session.rollback() keeps it;
    the write was forgotten with the rollback, and the cached result without the row
    stayed. On PostgreSQL the rollback undoes it, and the cache agrees as well."""
    engine = make_engine(db_url)
    factory = sessionmaker(engine)
    QueryCache(standalone.sync(), "atonce").attach(factory)
    counter = Counter(engine)
    query = select(Address.id, Address.email).order_by(Address.id)
    users, addresses = User.__table__, Address.__table__
    for end in ("rollback", "commit"):
        for _ in range(2):
            with factory() as session:
                counter.take()
                session.execute(query.options(cached())).all()
        assert counter.take() == 0, "stored, and served"
        with factory() as session:
            picked = select(users.c.id).where(users.c.id == 1).cte("picked")
            source = select(literal(100 if end == "rollback" else 101), picked.c.id, literal(end))
            session.execute(insert(addresses).from_select(["id", "user_id", "email"], source))
            getattr(session, end)()
        with factory() as session:
            got = session.execute(query.options(cached())).all()
        with factory() as session:
            assert got == session.execute(query).all(), end
    engine.dispose()
