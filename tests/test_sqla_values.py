"""seawall.sqlalchemy: a cached value is the value the database returns. The L1 never
shares a JSON dict with the session that loaded it, a timestamptz keeps its named zone,
and a MutableDict.as_mutable(JSON) column is cached and still tracks changes. SQLite and
a private PostgreSQL, sync and asyncio (the zone: PostgreSQL only, SQLite has none)."""

from __future__ import annotations

import asyncio
import datetime
import zoneinfo
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import JSON, DateTime, create_engine, select
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
from sqlalchemy.ext.mutable import MutableDict
from sqlalchemy.orm import DeclarativeBase, Mapped, defer, mapped_column, sessionmaker
from sqlaworkers import Counter, async_cached

from seawall.sqlalchemy import AsyncQueryCache, QueryCache, cached

PARIS = zoneinfo.ZoneInfo("Europe/Paris")


class Base(DeclarativeBase):
    pass


class Doc(Base):
    __tablename__ = "docs"
    id: Mapped[int] = mapped_column(primary_key=True)
    plain: Mapped[dict[str, Any]] = mapped_column(JSON)
    tracked: Mapped[dict[str, Any]] = mapped_column(MutableDict.as_mutable(JSON))


class Meeting(Base):
    __tablename__ = "meetings"
    id: Mapped[int] = mapped_column(primary_key=True)
    at: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True))


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[str]:
    url = (
        request.getfixturevalue("pg_url")
        if request.param == "postgresql"
        else f"sqlite:///{tmp_path / 'docs.db'}"
    )
    engine = create_engine(url)
    Base.metadata.create_all(engine, tables=[Doc.__table__])
    with sessionmaker(engine)() as session:
        session.add(Doc(id=1, plain={"lang": "en"}, tracked={"n": 1}))
        session.commit()
    engine.dispose()
    yield url


DOCS = select(Doc).options(cached())


def test_the_l1_never_shares_a_json_dict_with_a_session(db_url: str, standalone: Any) -> None:
    engine = create_engine(db_url)
    factory = sessionmaker(engine)
    QueryCache(standalone.sync(), "values").attach(factory)
    plain_only = select(Doc).options(defer(Doc.tracked), cached())
    with factory() as session:
        doc = session.execute(plain_only).scalar_one()  # a miss: loaded and stored
        doc.plain["lang"] = "fr"  # in place, untracked, then rolled back
        session.rollback()
    with factory() as session:
        doc = session.execute(plain_only).scalar_one()  # a hit, from this process's L1
        assert doc.plain == {"lang": "en"}, "the L1 held the loading session's dict"
    engine.dispose()


def test_a_mutable_dict_column_is_cached_and_tracked(db_url: str, standalone: Any) -> None:
    engine = create_engine(db_url)
    factory = sessionmaker(engine)
    QueryCache(standalone.sync(), "values").attach(factory)
    for _ in range(2):  # a miss, then a hit
        with factory() as session:
            doc = session.execute(DOCS).scalar_one()
            assert isinstance(doc.tracked, MutableDict) and doc.tracked == {"n": 1}
    with factory() as session:
        doc = session.execute(DOCS).scalar_one()
        doc.tracked["n"] = 2  # tracked: the commit writes it
        assert doc in session.dirty
        session.commit()
    with factory() as session:
        assert session.execute(DOCS).scalar_one().tracked == {"n": 2}
    engine.dispose()


def test_asyncio_json_copies_and_mutable_dicts(db_url: str, standalone: Any) -> None:
    plain_only = select(Doc).options(defer(Doc.tracked), cached())

    async def main() -> None:
        async with async_cached(db_url, standalone, "values") as factory:
            counter = Counter(factory.kw["bind"])
            async with factory() as session:
                doc = (await session.execute(plain_only)).scalar_one()  # a miss
                doc.plain["lang"] = "fr"  # in place, untracked, then rolled back
                await session.rollback()
            async with factory() as session:
                doc = (await session.execute(plain_only)).scalar_one()  # the L1's
                assert doc.plain == {"lang": "en"}, "the L1 held the loading session's dict"
            assert counter.take() == 1, "the second read is served from the cache"
            for expected_sql in (1, 0):  # a miss, then a hit
                async with factory() as session:
                    doc = (await session.execute(DOCS)).scalar_one()
                    assert isinstance(doc.tracked, MutableDict) and doc.tracked == {"n": 1}
                assert counter.take() == expected_sql
            async with factory() as session:
                doc = (await session.execute(DOCS)).scalar_one()
                doc.tracked["n"] = 2
                assert doc in session.dirty, "a cached MutableDict no longer tracks changes"
                await session.commit()
            async with factory() as session:
                assert (await session.execute(DOCS)).scalar_one().tracked == {"n": 2}

    asyncio.run(main())


def meeting(session: Any) -> datetime.datetime:
    return session.execute(select(Meeting).options(cached())).scalar_one().at


def test_a_timestamptz_keeps_its_zone(pg_url: str, standalone: Any) -> None:
    """PostgreSQL only: SQLite has no type with a zone (SQLAlchemy's DateTime stores its
    text without the offset), so there is no zone to keep."""
    engine = create_engine(pg_url, connect_args={"options": "-c timezone=Europe/Paris"})
    Base.metadata.create_all(engine, tables=[Meeting.__table__])
    factory = sessionmaker(engine)
    QueryCache(standalone.sync(), "zones").attach(factory)
    with factory() as session:
        session.add(Meeting(id=1, at=datetime.datetime(2026, 3, 28, 12, tzinfo=PARIS)))
        session.commit()
    read = []
    for _ in range(2):  # from the database, then from the cache
        with factory() as session:
            read.append(meeting(session))
    assert read[0].tzinfo == PARIS
    assert read[1] == read[0] and read[1].tzinfo == PARIS
    # A day later across the change to summer time: 12:00 in Paris, as from the database
    assert (read[1] + datetime.timedelta(days=1)).hour == 12
    assert (read[1] + datetime.timedelta(days=1)).utcoffset() == datetime.timedelta(hours=2)
    engine.dispose()


def test_asyncio_timestamptz(pg_url: str, standalone: Any) -> None:
    async def main() -> None:
        engine = create_async_engine(
            pg_url.replace("+psycopg", "+psycopg_async"),
            connect_args={"options": "-c timezone=Europe/Paris"},
        )
        async with engine.begin() as conn:
            await conn.run_sync(Base.metadata.create_all, tables=[Meeting.__table__])
        client = standalone.aio()
        factory = AsyncQueryCache(client, "zones").attach(async_sessionmaker(engine))
        try:
            async with factory() as session:
                session.add(Meeting(id=1, at=datetime.datetime(2026, 3, 28, 12, tzinfo=PARIS)))
                await session.commit()
            for _ in range(2):
                async with factory() as session:
                    assert (await session.run_sync(meeting)).tzinfo == PARIS
        finally:
            await client.aclose()
            await engine.dispose()

    asyncio.run(main())
