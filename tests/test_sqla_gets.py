"""seawall.sqlalchemy: a cached session.get() is invalidated by every write that changes
its answer: rows of its own table that eager loading brings with it (a self-referential
tree), its row written under a key spelled otherwise than the caller spelled it, and a
primary key changed to the one a cached "absent" names. SQLite and a private PostgreSQL,
sync and asyncio."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import ForeignKey, String, create_engine, text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship, sessionmaker
from sqlaworkers import Counter, async_cached

from seawall.sqlalchemy import QueryCache, cached


class Base(DeclarativeBase):
    pass


class Node(Base):
    __tablename__ = "nodes"
    id: Mapped[int] = mapped_column(primary_key=True)
    parent_id: Mapped[int | None] = mapped_column(ForeignKey("nodes.id"))
    label: Mapped[str]
    children: Mapped[list[Node]] = relationship(lazy="selectin", join_depth=2, order_by="Node.id")


class Code(Base):
    """A key the database compares without case (SQLite's NOCASE; on PostgreSQL a
    nondeterministic ICU collation of that name)."""

    __tablename__ = "codes"
    code: Mapped[str] = mapped_column(String(collation="NOCASE"), primary_key=True)
    label: Mapped[str]


def plant(engine: Any) -> None:
    Base.metadata.create_all(engine)
    with sessionmaker(engine)() as session:
        session.add(
            Node(id=1, label="root", children=[Node(id=2, label="a"), Node(id=3, label="b")])
        )
        session.add(Code(code="ann", label="first"))
        session.commit()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[str]:
    if request.param == "postgresql":
        url = request.getfixturevalue("pg_url")
        engine = create_engine(url)
        with engine.begin() as conn:  # PostgreSQL's NOCASE: ICU, compared at level 2
            conn.execute(
                text(
                    'CREATE COLLATION "NOCASE" '
                    "(provider = icu, locale = 'und-u-ks-level2', deterministic = false)"
                )
            )
        plant(engine)
    else:
        url = f"sqlite:///{tmp_path / 'tree.db'}"
        engine = create_engine(url)
        plant(engine)
    engine.dispose()
    yield url


def labels(factory: Any, node_id: int) -> Any:
    with factory() as session:
        node = session.get(Node, node_id, options=[cached()])
        return None if node is None else (node.label, [c.label for c in node.children])


def test_rows_eager_loading_brings_with_a_get(db_url: str, standalone: Any) -> None:
    engine = create_engine(db_url)
    factory = sessionmaker(engine)
    QueryCache(standalone.sync(), "tree").attach(factory)
    assert labels(factory, 1) == ("root", ["a", "b"])
    with factory() as session:
        session.get(Node, 2).label = "a2"
        session.commit()
    assert labels(factory, 1) == ("root", ["a2", "b"]), "a child's write was not seen"
    engine.dispose()


def test_a_primary_key_changed_to_one_cached_as_absent(db_url: str, standalone: Any) -> None:
    engine = create_engine(db_url)
    factory = sessionmaker(engine)
    QueryCache(standalone.sync(), "tree").attach(factory)
    assert labels(factory, 4) is None  # cached as absent
    with factory() as session:
        session.get(Node, 3).id = 4
        session.commit()
    assert labels(factory, 4) == ("b", [])
    assert labels(factory, 3) is None
    engine.dispose()


def test_a_key_spelled_otherwise_than_the_row(db_url: str, standalone: Any) -> None:
    engine = create_engine(db_url)
    factory = sessionmaker(engine)
    QueryCache(standalone.sync(), "codes").attach(factory)
    for _ in range(2):
        with factory() as session:
            assert session.get(Code, "ANN", options=[cached()]).label == "first"
    with factory() as session:
        session.get(Code, "ann").label = "second"
        session.commit()
    with factory() as session:
        assert session.get(Code, "ANN", options=[cached()]).label == "second"
    engine.dispose()


def test_asyncio_gets(db_url: str, standalone: Any) -> None:
    """The self-referential tree, the primary key changed to one cached as absent, the key
    spelled otherwise than the row."""

    async def main() -> None:
        async with async_cached(db_url, standalone, "tree") as factory:

            async def read(node_id: int) -> Any:
                async with factory() as session:
                    node = await session.get(Node, node_id, options=[cached()])
                    return None if node is None else (node.label, [c.label for c in node.children])

            async def change(node_id: int, **values: Any) -> None:
                async with factory() as session:
                    node = await session.get(Node, node_id)
                    for name, value in values.items():
                        setattr(node, name, value)
                    await session.commit()

            counter = Counter(factory.kw["bind"])
            for expected_sql in (3, 0):  # the node, its children, theirs; then a hit
                assert await read(1) == ("root", ["a", "b"])
                assert counter.take() == expected_sql
            assert await read(4) is None  # cached as absent
            await change(2, label="a2")
            assert await read(1) == ("root", ["a2", "b"]), "a child's write was not seen"
            await change(3, id=4)
            assert await read(4) == ("b", [])
            assert await read(3) is None

            async def code_label() -> str:
                async with factory() as session:
                    return (await session.get(Code, "ANN", options=[cached()])).label

            assert [await code_label(), await code_label()] == ["first", "first"]
            async with factory() as session:
                (await session.get(Code, "ann")).label = "second"
                await session.commit()
            assert await code_label() == "second", "the key spelled otherwise kept its answer"

    asyncio.run(main())
