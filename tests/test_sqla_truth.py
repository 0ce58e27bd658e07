"""seawall.sqlalchemy: a cached result is what the database returns for the statement,
whatever the reading session held before (its identity map, loaded relationships), on
SQLite and on a private PostgreSQL, sync and asyncio."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import create_engine, select
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
from sqlalchemy.orm import selectinload, sessionmaker
from sqlaworkers import Address, User, async_cached

from seawall.sqlalchemy import AsyncQueryCache, QueryCache, cached
from seawall.sqlalchemy._rows import encode_result


def commit_elsewhere(factory: Any, name: str, email: str) -> None:
    with factory() as writer:
        user = writer.get(User, 1)
        user.name = name
        user.addresses[0].email = email
        writer.commit()


def test_a_miss_stores_the_rows_read_not_the_sessions_objects(db_url: str, standalone: Any) -> None:
    engine = create_engine(db_url)
    factory = sessionmaker(engine)
    QueryCache(standalone.sync(), "truth").attach(factory)
    users = select(User).where(User.id == 1).options(cached())
    eager = select(User).where(User.id == 1).options(selectinload(User.addresses), cached())
    with factory() as holder:
        held = holder.execute(select(User).where(User.id == 1)).scalar_one()
        assert [a.email for a in held.addresses] == ["ann@example.com"]  # lazily loaded
        commit_elsewhere(factory, "anne", "anne@example.com")
        holder.execute(users).scalar_one()  # a miss, while the session holds "ann"
    with factory() as fresh:
        user = fresh.execute(users).scalar_one()
        assert user.name == "anne", "the session's old object was stored"
        assert [a.email for a in user.addresses] == ["anne@example.com"]
    with factory() as holder:
        held = holder.execute(select(User).where(User.id == 1)).scalar_one()
        assert [a.email for a in held.addresses] == ["anne@example.com"]  # lazily loaded
        with factory() as other:  # a commit to addresses only: the key of `users` stays
            other.get(Address, 10).email = "anna@example.com"
            other.commit()
        holder.execute(users).scalar_one()
    with factory() as fresh:
        user = fresh.execute(users).scalar_one()
        assert [a.email for a in user.addresses] == ["anna@example.com"], (
            "a relationship of a table the key does not cover was stored"
        )
    with factory() as holder:
        held = holder.execute(eager).scalar_one()
        commit_elsewhere(factory, "anna", "ann@new.example")
        holder.execute(eager).scalar_one()  # its addresses were loaded before that commit
    with factory() as fresh:
        user = fresh.execute(eager).scalar_one()
        assert (user.name, [a.email for a in user.addresses]) == ("anna", ["ann@new.example"])
    engine.dispose()


def user_and_emails(session: Any, query: Any) -> tuple[str, list[str]]:
    """Run inside AsyncSession.run_sync: a relationship the entry lacks loads lazily."""
    user = session.execute(query).scalar_one()
    return user.name, [a.email for a in user.addresses]


def test_asyncio_sessions_that_keep_objects_after_commit(db_url: str, standalone: Any) -> None:
    """expire_on_commit=False, as SQLAlchemy recommends for asyncio: the holder's objects
    and their collections outlive its commits, so a later miss meets them loaded."""
    users = select(User).where(User.id == 1).options(cached())
    eager = select(User).where(User.id == 1).options(selectinload(User.addresses), cached())
    plain = select(User).where(User.id == 1)

    async def main() -> None:
        async with async_cached(db_url, standalone, "truth", expire_on_commit=False) as factory:

            async def commit_elsewhere(name: str | None, email: str) -> None:
                async with factory() as writer:
                    loaded = await writer.execute(plain.options(selectinload(User.addresses)))
                    user = loaded.scalar_one()
                    user.name = name or user.name
                    user.addresses[0].email = email
                    await writer.commit()

            async def fresh(query: Any) -> tuple[str, list[str]]:
                async with factory() as session:
                    return await session.run_sync(user_and_emails, query)

            async with factory() as holder:
                held = (await holder.execute(plain)).scalar_one()
                await holder.run_sync(lambda _: held.addresses)  # lazily loaded
                await holder.commit()  # its objects stay loaded (expire_on_commit=False)
                await commit_elsewhere("anne", "anne@example.com")
                assert (await holder.execute(users)).scalar_one() is held  # a miss
            assert await fresh(users) == ("anne", ["anne@example.com"]), "old object stored"
            await commit_elsewhere(None, "anna@example.com")  # addresses: users' key stays
            assert await fresh(users) == ("anne", ["anna@example.com"]), (
                "a relationship of a table the key does not cover was stored"
            )
            async with factory() as holder:
                await holder.execute(eager)  # the selectinload collection, loaded...
                await holder.commit()
                await commit_elsewhere("anna", "ann@new.example")
                await holder.execute(eager)  # ...before that commit; a miss
            assert await fresh(eager) == ("anna", ["ann@new.example"])

    asyncio.run(main())


def test_relationships_of_tables_the_key_does_not_cover_are_not_stored(
    db_url: str,
) -> None:
    """What encode_result keeps of loaded relationships (end to end: the tests above)."""
    engine = create_engine(db_url)
    with sessionmaker(engine)() as session:
        user = session.get(User, 1)
        assert len(user.addresses) == 1
        narrow = encode_result(["User"], [[user]], "s", frozenset({"users"}))
        wide = encode_result(["User"], [[user]], "s", frozenset({"users", "addresses"}))
    assert narrow["objs"][0][2] == {} and len(narrow["objs"]) == 1
    assert list(wide["objs"][0][2]) == ["addresses"]
    engine.dispose()


def test_isolation_chosen_for_one_session(pg_url: str, standalone: Any) -> None:
    """REPEATABLE READ set on the session's connection: once the transaction has read, its
    snapshot may predate tokens read now, so it reads the database and stores nothing.
    PostgreSQL only: SQLite has no isolation level to choose per session (pysqlite offers
    SERIALIZABLE, its default, and READ UNCOMMITTED, which matters only with a shared
    cache between connections of one process)."""
    engine = create_engine(pg_url)  # READ COMMITTED by default
    factory = sessionmaker(engine)
    QueryCache(standalone.sync(), "isolation").attach(factory)
    users = select(User).where(User.id == 1).options(cached())
    with factory() as session:
        session.connection(execution_options={"isolation_level": "REPEATABLE READ"})
        session.execute(select(User.id)).all()  # the snapshot is taken
        with factory() as writer:
            writer.get(User, 1).name = "anne"
            writer.commit()
        assert session.execute(users).scalar_one().name == "ann"  # its snapshot
    with factory() as fresh:
        assert fresh.execute(users).scalar_one().name == "anne", "a snapshot was stored"
    engine.dispose()


def test_asyncio_isolation_chosen_for_one_session(pg_url: str, standalone: Any) -> None:
    async def main() -> None:
        engine = create_async_engine(pg_url.replace("+psycopg", "+psycopg_async"))
        client = standalone.aio()
        factory = AsyncQueryCache(client, "isolation").attach(async_sessionmaker(engine))
        users = select(User).where(User.id == 1).options(cached())
        try:
            async with factory() as session:
                await session.connection(execution_options={"isolation_level": "REPEATABLE READ"})
                (await session.execute(select(User.id))).all()
                async with factory() as writer:
                    (await writer.get(User, 1)).name = "anne"
                    await writer.commit()
                assert (await session.execute(users)).scalar_one().name == "ann"
            async with factory() as fresh:
                assert (await fresh.execute(users)).scalar_one().name == "anne"
        finally:
            await client.aclose()
            await engine.dispose()

    asyncio.run(main())
