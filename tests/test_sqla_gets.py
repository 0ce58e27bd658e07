"""seawall.sqlalchemy: a cached session.get() is invalidated by every write that changes
its answer: rows of its own table that eager loading brings with it (a self-referential
tree), its row written under a key spelled otherwise than the caller spelled it, and a
primary key changed to the one a cached "absent" names. SQLite and a private PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import ForeignKey, String, create_engine
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship, sessionmaker

from seawall.sqlalchemy import AsyncQueryCache, QueryCache, cached


class Base(DeclarativeBase):
    pass


class Node(Base):
    __tablename__ = "nodes"
    id: Mapped[int] = mapped_column(primary_key=True)
    parent_id: Mapped[int | None] = mapped_column(ForeignKey("nodes.id"))
    label: Mapped[str]
    children: Mapped[list[Node]] = relationship(lazy="selectin", join_depth=2, order_by="Node.id")


class Code(Base):
    """A key the database compares without case (SQLite's NOCASE)."""

    __tablename__ = "codes"
    code: Mapped[str] = mapped_column(String(collation="NOCASE"), primary_key=True)
    label: Mapped[str]


def plant(engine: Any, *, codes: bool) -> None:
    tables = [Node.__table__, *([Code.__table__] if codes else [])]
    Base.metadata.create_all(engine, tables=tables)
    with sessionmaker(engine)() as session:
        session.add(
            Node(id=1, label="root", children=[Node(id=2, label="a"), Node(id=3, label="b")])
        )
        if codes:
            session.add(Code(code="ann", label="first"))
        session.commit()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[str]:
    if request.param == "postgresql":
        url = request.getfixturevalue("pg_url")
        engine = create_engine(url)
        plant(engine, codes=False)
    else:
        url = f"sqlite:///{tmp_path / 'tree.db'}"
        engine = create_engine(url)
        plant(engine, codes=True)
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


def test_a_key_spelled_otherwise_than_the_row(tmp_path: Any, standalone: Any) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'codes.db'}")
    plant(engine, codes=True)
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


def test_asyncio_rows_eager_loading_brings_with_a_get(pg_url: str, standalone: Any) -> None:
    plant(create_engine(pg_url), codes=False)

    async def main() -> None:
        engine = create_async_engine(pg_url.replace("+psycopg", "+psycopg_async"))
        client = standalone.aio()
        factory = AsyncQueryCache(client, "tree").attach(async_sessionmaker(engine))

        async def read() -> Any:
            async with factory() as session:
                node = await session.get(Node, 1, options=[cached()])
                return node.label, [c.label for c in node.children]

        try:
            assert await read() == ("root", ["a", "b"])
            async with factory() as session:
                (await session.get(Node, 2)).label = "a2"
                await session.commit()
            assert await read() == ("root", ["a2", "b"])
        finally:
            await client.aclose()
            await engine.dispose()

    asyncio.run(main())
