"""seawall.sqlalchemy: rows the database deletes by ON DELETE CASCADE are invalidated with
the row that was deleted, for an ORM delete(Parent) (which runs against the ORM's copy of
the table) and a Core delete of the Table. SQLite (PRAGMA foreign_keys on) and a private
PostgreSQL, sync and asyncio."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import create_engine, delete, select
from sqlalchemy.orm import sessionmaker
from sqlaworkers import Address, User, async_cached, enforce_foreign_keys

from seawall.sqlalchemy import QueryCache, _tables, cached

EMAILS = select(Address.email).order_by(Address.id).options(cached())
DELETES = {"orm": delete(User).where(User.id == 1), "core": delete(User.__table__)}


@pytest.fixture(autouse=True)
def _as_if_run_alone() -> Iterator[None]:
    """The cascades found are remembered for the life of the process: forget them, so the
    outcome does not depend on what earlier tests looked up (the bug of issue 24 item 3
    showed only when this ran alone)."""
    _tables._cascaded.cache_clear()
    yield


@pytest.mark.parametrize("statement", DELETES)
def test_rows_deleted_by_cascade(db_url: str, standalone: Any, statement: str) -> None:
    engine = create_engine(db_url)
    enforce_foreign_keys(engine)
    factory = sessionmaker(engine)
    QueryCache(standalone.sync(), "cascade").attach(factory)

    def emails() -> list[str]:
        with factory() as session:
            return list(session.execute(EMAILS).scalars())

    assert emails() == ["ann@example.com"]
    with factory() as session:
        if statement == "core":  # user 2's tag would block it: a plain foreign key
            session.execute(delete(User.tags.property.secondary))
        session.execute(DELETES[statement])
        session.commit()
    assert emails() == [], "the cascade's deletes are still cached"
    engine.dispose()


@pytest.mark.parametrize("statement", DELETES)
def test_asyncio_rows_deleted_by_cascade(db_url: str, standalone: Any, statement: str) -> None:
    async def main() -> None:
        async with async_cached(db_url, standalone, "cascade") as factory:
            enforce_foreign_keys(factory.kw["bind"])

            async def emails() -> list[str]:
                async with factory() as session:
                    return list((await session.execute(EMAILS)).scalars())

            assert await emails() == ["ann@example.com"]
            async with factory() as session:
                if statement == "core":
                    await session.execute(delete(User.tags.property.secondary))
                await session.execute(DELETES[statement])
                await session.commit()
            assert await emails() == []

    asyncio.run(main())
