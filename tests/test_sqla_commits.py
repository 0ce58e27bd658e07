"""seawall.sqlalchemy: tokens are dropped after the COMMIT that makes writes visible, not
before and not never: a session joined to a transaction begun outside it (SQLAlchemy's
recipe for test suites) waits for that transaction's COMMIT, and writes on an AUTOCOMMIT
connection are acted on as they run, and a SELECT whose CTE writes is a write (PostgreSQL
only: SQLite has none). SQLite and a private PostgreSQL, sync and asyncio."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import create_engine, select, update
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
from sqlalchemy.orm import sessionmaker
from sqlaworkers import User, async_cached

from seawall.sqlalchemy import AsyncQueryCache, QueryCache, cached

QUERY = select(User.name).order_by(User.id).options(cached())


def names(factory: Any) -> list[str]:
    with factory() as session:
        return list(session.execute(QUERY).scalars())


@pytest.mark.parametrize("mode", ["conditional_savepoint", "create_savepoint"])
def test_a_session_joined_to_an_outer_transaction(db_url: str, standalone: Any, mode: str) -> None:
    engine = create_engine(db_url)
    factory = sessionmaker(engine)
    QueryCache(standalone.sync(), "joined").attach(factory)
    assert names(factory) == ["ann", "bob"]
    with engine.connect() as conn:
        outer = conn.begin()
        with factory(bind=conn, join_transaction_mode=mode) as session:
            session.get(User, 1).name = "anne"
            session.commit()  # commits nothing: the outer transaction is still open
        assert names(factory) == ["ann", "bob"]  # what others read, and may store
        outer.commit()
    assert names(factory) == ["anne", "bob"], "the real COMMIT invalidated nothing"
    with engine.connect() as conn:
        outer = conn.begin()
        with factory(bind=conn, join_transaction_mode=mode) as session:
            session.get(User, 2).name = "bobby"
            session.commit()
        outer.rollback()
        assert names(factory) == ["anne", "bob"]
        with conn.begin():  # a later transaction of that connection: nothing pending
            pass
    assert names(factory) == ["anne", "bob"]
    engine.dispose()


def test_writes_on_an_autocommit_connection(db_url: str, standalone: Any) -> None:
    engine = create_engine(db_url, isolation_level="AUTOCOMMIT")
    factory = sessionmaker(engine)
    QueryCache(standalone.sync(), "autocommit").attach(factory)
    assert names(factory) == ["ann", "bob"]
    with factory() as session:
        session.execute(update(User).where(User.id == 1).values(name="anne"))
        assert names(factory) == ["anne", "bob"], "committed, yet the old rows are served"
    assert names(factory) == ["anne", "bob"]
    with factory() as session:
        session.get(User, 2).name = "bobby"
        session.flush()
        assert names(factory) == ["anne", "bobby"]
    engine.dispose()


def test_asyncio_session_joined_to_an_outer_transaction(db_url: str, standalone: Any) -> None:
    async def main() -> None:
        async with async_cached(db_url, standalone, "joined") as factory:
            engine = factory.kw["bind"]

            async def read() -> list[str]:
                async with factory() as session:
                    return list((await session.execute(QUERY)).scalars())

            assert await read() == ["ann", "bob"]
            async with engine.connect() as conn:
                outer = await conn.begin()
                async with factory(bind=conn) as session:
                    (await session.get(User, 1)).name = "anne"
                    await session.commit()  # commits nothing: the outer transaction is open
                assert await read() == ["ann", "bob"]
                await outer.commit()
            assert await read() == ["anne", "bob"], "the real COMMIT invalidated nothing"

    asyncio.run(main())


def test_asyncio_writes_on_an_autocommit_connection(db_url: str, standalone: Any) -> None:
    async def main() -> None:
        options = {"isolation_level": "AUTOCOMMIT"}
        async with async_cached(db_url, standalone, "ac", engine_options=options) as factory:

            async def read() -> list[str]:
                async with factory() as session:
                    return list((await session.execute(QUERY)).scalars())

            assert await read() == ["ann", "bob"]
            async with factory() as session:
                await session.execute(update(User).where(User.id == 1).values(name="anne"))
                assert await read() == ["anne", "bob"], "committed, yet the old rows are served"
            async with factory() as session:
                (await session.get(User, 2)).name = "bobby"
                await session.flush()
                assert await read() == ["anne", "bobby"]

    asyncio.run(main())


def renamed_by_cte(session: Any, name: str, *options: Any) -> list[int]:
    renamed = update(User).where(User.id == 1).values(name=name).returning(User.id).cte("u")
    return list(session.execute(select(renamed.c.id).add_cte(renamed).options(*options)).scalars())


def test_a_select_with_a_data_modifying_cte_is_a_write(pg_url: str, standalone: Any) -> None:
    """PostgreSQL only: SQLite has no data-modifying CTE (a WITH clause holds a SELECT
    only), so the statement cannot be written there."""
    engine = create_engine(pg_url)
    factory = sessionmaker(engine)
    QueryCache(standalone.sync(), "cte").attach(factory)
    assert names(factory) == ["ann", "bob"]
    with factory() as session:
        assert renamed_by_cte(session, "anne") == [1]
        assert list(session.execute(QUERY).scalars()) == ["anne", "bob"], "its own write"
        session.commit()
    assert names(factory) == ["anne", "bob"], "the CTE's write was not seen"
    for name in ("anna", "annie"):  # cached() on it: run each time, never stored
        with factory() as session:
            assert renamed_by_cte(session, name, cached()) == [1]
            session.commit()
        assert names(factory) == [name, "bob"]
    engine.dispose()


def test_asyncio_data_modifying_cte(pg_url: str, standalone: Any) -> None:
    """PostgreSQL only, as above."""

    async def main() -> None:
        engine = create_async_engine(pg_url.replace("+psycopg", "+psycopg_async"))
        client = standalone.aio()
        factory = AsyncQueryCache(client, "cte").attach(async_sessionmaker(engine))

        async def read() -> list[str]:
            async with factory() as session:
                return list((await session.execute(QUERY)).scalars())

        try:
            assert await read() == ["ann", "bob"]
            async with factory() as session:
                assert await session.run_sync(renamed_by_cte, "anne") == [1]
                await session.commit()
            assert await read() == ["anne", "bob"]
        finally:
            await client.aclose()
            await engine.dispose()

    asyncio.run(main())
