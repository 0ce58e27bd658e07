"""seawall.sqlalchemy against the database itself: a seeded random workload of ORM and
Core reads and writes through two QueryCaches of one namespace (one with an L1, one
without, as two processes would be), with relationships loaded lazily, by selectinload
and by joinedload, gets by key, bulk and textual writes, savepoints and rollbacks, a
session that keeps its objects across other sessions' commits, sessions of a tenant
(SQLAlchemy's with_loader_criteria recipe, added by a listener after attach()), and a
self-referential tree loaded two levels deep. After
every cached read in a fresh session the same statement runs uncached, and the two must
agree.

A few fixed seeds run here; `python3 scripts/dev.py soak sqla` (SEAWALL_DIFF_OPS=10000)
runs a longer workload. A difference found becomes a fixed seed."""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import ForeignKey, create_engine, delete, event, insert, select, text, update
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import (
    DeclarativeBase,
    Mapped,
    ORMExecuteState,
    joinedload,
    mapped_column,
    relationship,
    selectinload,
    sessionmaker,
    with_loader_criteria,
)
from sqlaworkers import Address, Base, User, seed

from seawall.sqlalchemy import QueryCache, cached

OPS = int(os.environ.get("SEAWALL_DIFF_OPS", "250"))


def users_plain(session: Any, *options: Any) -> Any:
    query = select(User).order_by(User.id).options(*options)
    return [(u.id, u.name) for u in session.execute(query).scalars()]


def users_with_addresses(session: Any, loader: Callable[..., Any], *options: Any) -> Any:
    query = select(User).order_by(User.id).options(loader(User.addresses), *options)
    return [
        (u.id, u.name, sorted(a.email for a in u.addresses))
        for u in session.execute(query).unique().scalars()
    ]


def emails_of(session: Any, user_id: int, *options: Any) -> Any:
    query = select(Address.email).where(Address.user_id == user_id).options(*options)
    return sorted(session.execute(query.order_by(Address.id)).scalars())


def joined(session: Any, *options: Any) -> Any:
    query = select(User.name, Address.email).join(User.addresses).options(*options)
    return [tuple(row) for row in session.execute(query.order_by(Address.id))]


def got_user(session: Any, user_id: int, *options: Any) -> Any:
    user = session.get(User, user_id, options=list(options))
    return None if user is None else (user.name, sorted(a.email for a in user.addresses))


def got_address(session: Any, address_id: int, *options: Any) -> Any:
    found = session.get(Address, address_id, options=list(options))
    return None if found is None else (found.email, found.user_id)


class TreeBase(DeclarativeBase):
    pass


class Node(TreeBase):
    """A self-referential tree, loaded two levels deep by every read of a node."""

    __tablename__ = "nodes"
    id: Mapped[int] = mapped_column(primary_key=True)
    parent_id: Mapped[int | None] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"))
    label: Mapped[str]
    children: Mapped[list[Node]] = relationship(
        lazy="selectin", join_depth=2, order_by="Node.id", passive_deletes=True
    )


def tree_of(node: Node | None) -> Any:
    if node is None:
        return None
    return (
        node.id,
        node.label,
        [(c.id, c.label, [g.id for g in c.children]) for c in node.children],
    )


def got_node(session: Any, node_id: int, *options: Any) -> Any:
    return tree_of(session.get(Node, node_id, options=list(options)))


def roots(session: Any, *options: Any) -> Any:
    query = select(Node).where(Node.parent_id.is_(None)).order_by(Node.id).options(*options)
    return [tree_of(node) for node in session.execute(query).scalars()]


READS: list[Callable[[random.Random], Callable[..., Any]]] = [
    lambda rng: (lambda k: lambda s, *o: got_node(s, k, *o))(rng.randint(1, 6)),
    lambda rng: roots,
    lambda rng: users_plain,
    lambda rng: lambda s, *o: users_with_addresses(s, selectinload, *o),
    lambda rng: lambda s, *o: users_with_addresses(s, joinedload, *o),
    lambda rng: (lambda k: lambda s, *o: emails_of(s, k, *o))(rng.randint(1, 6)),
    lambda rng: joined,
    lambda rng: (lambda k: lambda s, *o: got_user(s, k, *o))(rng.randint(1, 6)),
    lambda rng: (lambda k: lambda s, *o: got_address(s, k, *o))(rng.randint(10, 16)),
]


def write(session: Any, rng: random.Random, ids: Iterator[int]) -> None:
    """One write of a random kind, through the ORM, Core, bulk or SQL text."""
    kind = rng.randrange(11)
    user_id = rng.randint(1, 6)
    if kind == 0:
        user = session.get(User, user_id)
        if user is not None:
            user.name = f"u{rng.randrange(100)}"
    elif kind == 1:
        if session.get(User, user_id) is not None:
            session.add(Address(id=next(ids), user_id=user_id, email=f"e{rng.randrange(100)}"))
    elif kind == 2:
        found = session.get(Address, rng.randint(10, 16))
        if found is not None:
            session.delete(found)
    elif kind == 3:
        session.execute(update(User).where(User.id == user_id).values(name=f"b{rng.randrange(9)}"))
    elif kind == 4:
        session.execute(delete(Address).where(Address.user_id == user_id))
    elif kind == 5:
        if session.get(User, user_id) is None:
            session.execute(insert(User).values(id=user_id, name="new", tier="FREE", prefs={}))
    elif kind == 6:
        session.execute(
            text("UPDATE addresses SET email = :e WHERE id = :i"),
            {"e": f"t{rng.randrange(9)}", "i": rng.randint(10, 16)},
        )
    elif kind == 7:
        session.execute(delete(User).where(User.id == user_id))  # addresses cascade
    elif kind == 8:
        node = session.get(Node, rng.randint(1, 6))
        if node is not None:
            node.label = f"n{rng.randrange(100)}"
    elif kind == 9:
        parent = session.get(Node, rng.randint(1, 6))
        if parent is not None:
            session.add(Node(id=next(ids), parent_id=parent.id, label="new"))
    else:
        session.execute(delete(Node).where(Node.id == rng.randint(2, 6)))  # its subtree too


def tenant_filter(state: ORMExecuteState) -> None:
    """SQLAlchemy's multi-tenant recipe, registered after attach(): a session whose info
    names a tenant (0 or 1) sees the users whose id has that parity."""
    tenant = state.session.info.get("tenant")
    if tenant is None or not state.is_select or state.is_relationship_load:
        return
    if state.is_column_load:
        return
    state.statement = state.statement.options(
        with_loader_criteria(User, lambda cls: cls.id % 2 == tenant, include_aliases=True)
    )


def run_workload(url: str, client: Any, seed_value: int, ops: int) -> int:
    """Returns the number of cached reads compared; raises on the first difference."""
    engine = create_engine(url)
    if engine.dialect.name == "sqlite":

        @event.listens_for(engine, "connect")
        def cascade(dbapi_connection: Any, record: Any) -> None:
            dbapi_connection.execute("PRAGMA foreign_keys = ON")

    rng = random.Random(seed_value)
    processes = []
    for options in ({}, {"l1_size": 0, "hot_keys": 0}):
        factory = sessionmaker(engine)
        QueryCache(client, f"diff{seed_value}", **options).attach(factory)
        event.listen(factory, "do_orm_execute", tenant_filter)
        processes.append(factory)
    truth = sessionmaker(engine)  # no QueryCache: the database's answer
    event.listen(truth, "do_orm_execute", tenant_filter)
    holder = processes[0]()  # keeps its objects while others commit
    kept: list[Any] = []
    ids = iter(range(100, 1_000_000))
    compared = 0
    try:
        for step in range(ops):
            factory = rng.choice(processes)
            roll = rng.random()
            if roll < 0.5:
                read = rng.choice(READS)(rng)
                info = {"tenant": rng.choice((0, 1))} if rng.random() < 0.3 else {}
                with factory(info=info) as session:
                    got = read(session, cached())
                with truth(info=info) as session:
                    expected = read(session)
                assert got == expected, f"seed {seed_value}, step {step}: {got} != {expected}"
                compared += 1
            elif roll < 0.65:
                # A session that keeps what it loaded, sometimes across other commits:
                # what its cached reads store must still be the database's rows.
                choice = rng.random()
                if choice < 0.2:
                    holder.rollback()
                    kept.clear()
                elif choice < 0.5:
                    users = holder.execute(select(User)).scalars().all()
                    kept.extend(users)
                    kept.extend(address for user in users for address in user.addresses)
                else:
                    rng.choice(READS)(rng)(holder, cached())
            else:
                with factory() as session:
                    nested = rng.random() < 0.2
                    if nested:
                        savepoint = session.begin_nested()
                    try:
                        write(session, rng, ids)
                        session.flush()
                    except DBAPIError:  # a key another row still references, ...
                        session.rollback()
                        continue
                    if nested and rng.random() < 0.5:
                        savepoint.rollback()
                    if rng.random() < 0.8:
                        session.commit()
                    else:
                        session.rollback()
    finally:
        holder.close()
        engine.dispose()
    return compared


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
    TreeBase.metadata.create_all(engine)
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
    db_url: str, standalone: Any, seed_value: int
) -> None:
    add_rows(db_url)
    assert run_workload(db_url, standalone.sync(), seed_value, OPS) > OPS // 3
