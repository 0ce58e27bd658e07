"""seawall.sqlalchemy: a cached result is keyed by every table it reads, also those the
statement does not name: a column_property's subquery, a relationship's custom join
condition, a loader option's SQL; a view only with its base tables declared. SQLite and a
private PostgreSQL, sync and asyncio."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
from sqlalchemy import ForeignKey, create_engine, func, select, text, update
from sqlalchemy.orm import (
    DeclarativeBase,
    Mapped,
    column_property,
    mapped_column,
    query_expression,
    relationship,
    sessionmaker,
    with_expression,
    with_loader_criteria,
)
from sqlaworkers import Counter, async_cached

from seawall.sqlalchemy import QueryCache, cached


class Base(DeclarativeBase):
    pass


class Post(Base):
    __tablename__ = "posts"
    id: Mapped[int] = mapped_column(primary_key=True)
    author_id: Mapped[int] = mapped_column(ForeignKey("authors.id"))
    flagged: Mapped[bool] = query_expression()


class Flag(Base):
    """A post hidden by moderation: named only in a join condition."""

    __tablename__ = "flags"
    post_id: Mapped[int] = mapped_column(ForeignKey("posts.id"), primary_key=True)


class Like(Base):
    """Counted by a column_property only."""

    __tablename__ = "likes"
    id: Mapped[int] = mapped_column(primary_key=True)
    author_id: Mapped[int] = mapped_column(ForeignKey("authors.id"))


class Author(Base):
    __tablename__ = "authors"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str]
    likes: Mapped[int] = column_property(
        select(func.count(Like.id)).where(Like.author_id == id).scalar_subquery()
    )
    visible: Mapped[list[Post]] = relationship(
        primaryjoin=lambda: (Post.author_id == Author.id) & Post.id.not_in(select(Flag.post_id)),
        lazy="selectin",
        viewonly=True,
        order_by=Post.id,
    )


class DeclaredView(Base):
    """A view whose Table declares the table it reads."""

    __tablename__ = "declared_names"
    __table_args__: ClassVar[dict[str, Any]] = {"info": {"seawall.reads": ["authors"]}}
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str]


class PlainView(Base):
    """A view declaring nothing: never cached."""

    __tablename__ = "plain_names"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str]


VIEWS = [DeclaredView.__table__, PlainView.__table__]


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[str]:
    url = (
        request.getfixturevalue("pg_url")
        if request.param == "postgresql"
        else f"sqlite:///{tmp_path / 'blog.db'}"
    )
    engine = create_engine(url)
    Base.metadata.create_all(
        engine, tables=[t for t in Base.metadata.sorted_tables if t not in VIEWS]
    )
    with engine.begin() as conn:
        for view in VIEWS:
            conn.execute(text(f"CREATE VIEW {view.name} AS SELECT id, name FROM authors"))
    with sessionmaker(engine)() as session:
        session.add(Author(id=1, name="ann"))
        session.flush()
        session.add_all([Post(id=1, author_id=1), Post(id=2, author_id=1)])
        session.commit()
    engine.dispose()
    yield url


def read(factory: Any) -> tuple[int, list[int]]:
    with factory() as session:
        author = session.execute(select(Author).options(cached())).scalar_one()
        return author.likes, [post.id for post in author.visible]


def test_tables_the_statement_does_not_name(db_url: str, standalone: Any) -> None:
    engine = create_engine(db_url)
    factory = sessionmaker(engine)
    QueryCache(standalone.sync(), "blog").attach(factory)
    assert read(factory) == (0, [1, 2])
    with factory() as session:
        session.add(Like(id=1, author_id=1))
        session.commit()
    assert read(factory) == (1, [1, 2]), "a write to a column_property's table was not seen"
    with factory() as session:
        session.add(Flag(post_id=2))
        session.commit()
    assert read(factory) == (1, [1]), "a write to the join condition's table was not seen"
    engine.dispose()


def test_views(db_url: str, standalone: Any) -> None:
    engine = create_engine(db_url)
    factory = sessionmaker(engine)
    QueryCache(standalone.sync(), "blog").attach(factory)
    counter = Counter(engine)

    def names(view: Any) -> list[str]:
        with factory() as session:
            return list(session.execute(select(view.name).options(cached())).scalars())

    for expected_sql in (1, 0):  # a miss, then a hit
        assert names(DeclaredView) == ["ann"]
        assert counter.take() == expected_sql
        assert names(PlainView) == ["ann"]
        counter.take()
    with factory() as session:
        session.execute(update(Author).values(name="anne"))
        session.commit()
    assert names(DeclaredView) == ["anne"], "a write to the view's base table was not seen"
    assert names(PlainView) == ["anne"], "a view whose base tables are unknown was cached"
    engine.dispose()


def test_tables_loader_options_read(db_url: str, standalone: Any) -> None:
    """with_expression() and with_loader_criteria() carry SQL of their own."""
    engine = create_engine(db_url)
    factory = sessionmaker(engine)
    QueryCache(standalone.sync(), "blog").attach(factory)
    is_flagged = select(Flag.post_id).where(Flag.post_id == Post.id).exists()
    flagged = select(Post).order_by(Post.id).options(with_expression(Post.flagged, is_flagged))
    unflagged = select(Post.id).order_by(Post.id)
    unflagged = unflagged.options(with_loader_criteria(Post, Post.id.not_in(select(Flag.post_id))))

    def read() -> tuple[list[bool], list[int]]:
        with factory() as session:
            posts = session.execute(flagged.options(cached())).scalars().all()
            ids = session.execute(unflagged.options(cached())).scalars().all()
            return [bool(post.flagged) for post in posts], list(ids)

    assert read() == ([False, False], [1, 2])
    with factory() as session:
        session.add(Flag(post_id=1))
        session.commit()
    assert read() == ([True, False], [2]), "a write to a loader option's table was not seen"
    engine.dispose()


def test_asyncio_tables_the_statement_does_not_name(db_url: str, standalone: Any) -> None:
    is_flagged = select(Flag.post_id).where(Flag.post_id == Post.id).exists()
    flagged = select(Post).order_by(Post.id).options(with_expression(Post.flagged, is_flagged))

    async def main() -> None:
        async with async_cached(db_url, standalone, "blog") as factory:

            async def read() -> tuple[int, list[int], list[bool]]:
                async with factory() as session:
                    author = (await session.execute(select(Author).options(cached()))).scalar_one()
                    posts = (await session.execute(flagged.options(cached()))).scalars().all()
                    visible = [post.id for post in author.visible]
                    return author.likes, visible, [bool(post.flagged) for post in posts]

            async def commit(row: Any) -> None:
                async with factory() as session:
                    session.add(row)
                    await session.commit()

            counter = Counter(factory.kw["bind"])
            # Twice: the with_expression subquery's first run changes its cache key
            # (SQLAlchemy gives the inner SELECT the ORM's compile options), one more miss
            for _ in range(2):
                assert await read() == (0, [1, 2], [False, False])
            counter.take()
            assert await read() == (0, [1, 2], [False, False])
            assert counter.take() == 0, "served from the cache"
            await commit(Like(id=1, author_id=1))
            assert await read() == (1, [1, 2], [False, False]), "column_property's table"
            await commit(Flag(post_id=2))
            assert await read() == (1, [1], [False, True]), "join condition's, option's table"

    asyncio.run(main())


def test_asyncio_views(db_url: str, standalone: Any) -> None:
    async def main() -> None:
        async with async_cached(db_url, standalone, "blog") as factory:
            counter = Counter(factory.kw["bind"])

            async def names(view: Any) -> list[str]:
                async with factory() as session:
                    result = await session.execute(select(view.name).options(cached()))
                    return list(result.scalars())

            for expected_sql in (1, 0):  # a miss, then a hit
                assert await names(DeclaredView) == ["ann"]
                assert counter.take() == expected_sql
            async with factory() as session:
                await session.execute(update(Author).values(name="anne"))
                await session.commit()
            assert await names(DeclaredView) == ["anne"], "the view's base table"
            assert await names(PlainView) == ["anne"]
            counter.take()
            assert await names(PlainView) == ["anne"]
            assert counter.take() == 1, "a view whose base tables are unknown was cached"

    asyncio.run(main())
