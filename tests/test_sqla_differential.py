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
from sqladiff import DiffBase, Node, Peer, World, run_steps
from sqlalchemy import create_engine
from sqlalchemy.orm import sessionmaker
from sqlaworkers import Address, Base, User, seed

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


def add_rows(url: str) -> None:
    engine = create_engine(url)
    DiffBase.metadata.create_all(engine)
    with sessionmaker(engine)() as session:
        session.add(
            Node(id=1, label="root", children=[Node(id=2, label="a"), Node(id=3, label="b")])
        )
        session.add(Node(id=5, label="other", children=[Node(id=6, label="c")]))
        session.flush()
        session.add(Node(id=4, parent_id=3, label="d"))
        session.commit()
    with sessionmaker(engine)() as session:
        for user_id in (3, 4, 5):
            session.add(User(id=user_id, name=f"user{user_id}"))
        session.flush()
        for address_id in (11, 12, 13, 14):
            session.add(Address(id=address_id, user_id=address_id - 9, email=f"a{address_id}"))
        session.commit()
    engine.dispose()


@pytest.mark.parametrize("seed_value", [1, 2])
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
        assert run_steps(local, peer, seed_value, OPS) > OPS // 3
    finally:
        peer.call("shut")
        local.close()
