"""seawall.sqlalchemy and SQL text: a SET is not a write, a from_statement(text(SELECT))
is cached, and SQL text that may read any table is keyed by every table its MetaData
declares. SQLite and a private PostgreSQL, sync and asyncio."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import create_engine, select, text
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
from sqlalchemy.orm import sessionmaker
from sqlaworkers import Address, Counter, User, async_cached

from seawall.sqlalchemy import AsyncQueryCache, QueryCache, cached

QUERY = select(User.name).order_by(User.id).options(cached())


def test_set_local_is_not_a_write(pg_url: str, standalone: Any) -> None:
    """PostgreSQL only: SQLite has no SET (its PRAGMAs are not transaction-local)."""
    engine = create_engine(pg_url)
    factory = sessionmaker(engine)
    QueryCache(standalone.sync(), "set").attach(factory)
    counter = Counter(engine)
    with factory() as session:
        session.execute(QUERY).all()
        session.get(User, 2, options=[cached()])
    with factory() as session:
        session.execute(text("SET LOCAL statement_timeout = '5s'"))
        assert list(session.execute(QUERY).scalars()) == ["ann", "bob"]  # the database
        session.commit()
    counter.take()
    with factory() as session:
        assert list(session.execute(QUERY).scalars()) == ["ann", "bob"]
        assert session.get(User, 2, options=[cached()]).name == "bob"
    assert counter.take() == 0, "a SET emptied the cache"
    engine.dispose()


def test_asyncio_set_local_is_not_a_write(pg_url: str, standalone: Any) -> None:
    async def main() -> None:
        engine = create_async_engine(pg_url.replace("+psycopg", "+psycopg_async"))
        client = standalone.aio()
        factory = AsyncQueryCache(client, "set").attach(async_sessionmaker(engine))
        counter = Counter(engine)
        try:
            async with factory() as session:
                (await session.execute(QUERY)).all()
            async with factory() as session:
                await session.execute(text("SET LOCAL statement_timeout = '5s'"))
                await session.commit()
            counter.take()
            async with factory() as session:
                assert list((await session.execute(QUERY)).scalars()) == ["ann", "bob"]
            assert counter.take() == 0
        finally:
            await client.aclose()
            await engine.dispose()

    asyncio.run(main())


TEXTUAL = (
    select(User)
    .from_statement(
        text(
            "SELECT users.* FROM users JOIN addresses ON addresses.user_id = users.id "
            "WHERE addresses.email LIKE :pattern"
        )
    )
    .options(cached())
)
FRAGMENT = (
    select(User.name)
    .where(text("users.id IN (SELECT user_id FROM addresses WHERE email LIKE '%@new')"))
    .options(cached())
)


def test_from_statement_text_is_cached_and_invalidated(db_url: str, standalone: Any) -> None:
    engine = create_engine(db_url)
    factory = sessionmaker(engine)
    QueryCache(standalone.sync(), "text").attach(factory)
    counter = Counter(engine)
    textual = TEXTUAL

    def found() -> list[str]:
        with factory() as session:
            return [u.name for u in session.execute(textual, {"pattern": "%@new"}).scalars()]

    assert found() == []
    counter.take()
    assert found() == []
    assert counter.take() == 0, "from_statement(text(SELECT)) is cached"
    with factory() as session:  # a table the text names but the mapping does not
        session.get(Address, 10).email = "ann@new"
        session.commit()
    assert found() == ["ann"]
    engine.dispose()


def test_text_fragments_are_covered(db_url: str, standalone: Any) -> None:
    engine = create_engine(db_url)
    factory = sessionmaker(engine)
    QueryCache(standalone.sync(), "fragment").attach(factory)
    fragment = FRAGMENT

    def found() -> list[str]:
        with factory() as session:
            return list(session.execute(fragment).scalars())

    assert found() == []
    with factory() as session:
        session.get(Address, 10).email = "ann@new"
        session.commit()
    assert found() == ["ann"], "the table named in SQL text was not covered"
    engine.dispose()


def test_asyncio_from_statement_and_fragments(db_url: str, standalone: Any) -> None:
    async def main() -> None:
        async with async_cached(db_url, standalone, "text") as factory:
            counter = Counter(factory.kw["bind"])

            async def found() -> tuple[list[str], list[str]]:
                async with factory() as session:
                    result = await session.execute(TEXTUAL, {"pattern": "%@new"})
                    names = [user.name for user in result.scalars()]
                    return names, list((await session.execute(FRAGMENT)).scalars())

            assert await found() == ([], [])
            counter.take()
            assert await found() == ([], [])
            assert counter.take() == 0, "from_statement(text(SELECT)) is cached"
            async with factory() as session:  # a table only the SQL text names
                (await session.get(Address, 10)).email = "ann@new"
                await session.commit()
            assert await found() == (["ann"], ["ann"]), "a table named in SQL text"

    asyncio.run(main())
