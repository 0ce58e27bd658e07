"""seawall.sqlalchemy: one tenant never reads another's cached rows. SQLAlchemy's
multi-tenant recipes: with_loader_criteria added by a do_orm_execute listener registered
after attach() (on the factory, or on every Session), and a schema per tenant with
schema_translate_map (on the engine, or per call); for queries and for session.get."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event, select, text
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
from sqlalchemy.orm import ORMExecuteState, Session, sessionmaker, with_loader_criteria
from sqlaworkers import Base, Counter, User, async_cached, async_url

from seawall.sqlalchemy import AsyncQueryCache, QueryCache, _keys, cached


def only_the_tenants_user(state: ORMExecuteState) -> None:
    """The recipe: each session sees its tenant's rows only (here: the user whose id is
    the tenant's), from session.info or from an execution option."""
    if state.is_select and not state.is_column_load and not state.is_relationship_load:
        tenant = state.execution_options.get("tenant", state.session.info.get("tenant"))
        state.statement = state.statement.options(
            with_loader_criteria(User, lambda cls: cls.id == tenant, include_aliases=True)
        )


def seen(session: Any, **options: Any) -> tuple[list[str], str | None]:
    query = select(User).order_by(User.id).options(cached())
    names = [user.name for user in session.execute(query, execution_options=options).scalars()]
    got = session.get(User, 1, options=[cached()], execution_options=options)
    return names, None if got is None else got.name


async def seen_async(session: Any, **options: Any) -> tuple[list[str], str | None]:
    query = select(User).order_by(User.id).options(cached())
    result = await session.execute(query, execution_options=options)
    names = [user.name for user in result.scalars()]
    got = await session.get(User, 1, options=[cached()], execution_options=options)
    return names, None if got is None else got.name


def test_loader_criteria_added_after_attach_on_the_factory(db_url: str, standalone: Any) -> None:
    engine = create_engine(db_url)
    factory = sessionmaker(engine)
    QueryCache(standalone.sync(), "tenants").attach(factory)
    event.listen(factory, "do_orm_execute", only_the_tenants_user)
    counter = Counter(engine)
    for expected_sql in (4, 0):  # misses, then hits
        with factory(info={"tenant": 1}) as session:
            assert seen(session) == (["ann"], "ann")
        with factory(info={"tenant": 2}) as session:
            assert seen(session) == (["bob"], None), "tenant 2 got tenant 1's rows"
        assert counter.take() == expected_sql
    engine.dispose()


def test_loader_criteria_added_for_every_session(db_url: str, standalone: Any) -> None:
    engine = create_engine(db_url)
    factory = sessionmaker(engine)
    QueryCache(standalone.sync(), "tenants").attach(factory)
    event.listen(Session, "do_orm_execute", only_the_tenants_user)
    try:
        for _ in range(2):
            with factory() as session:
                assert seen(session, tenant=1) == (["ann"], "ann")
            with factory() as session:
                assert seen(session, tenant=2) == (["bob"], None)
    finally:
        event.remove(Session, "do_orm_execute", only_the_tenants_user)
        engine.dispose()


def test_asyncio_loader_criteria(db_url: str, standalone: Any) -> None:
    async def main() -> None:
        async with async_cached(db_url, standalone, "tenants") as factory:
            counter = Counter(factory.kw["bind"])
            event.listen(Session, "do_orm_execute", only_the_tenants_user)
            try:
                for expected_sql in (4, 0):  # misses, then hits
                    async with factory(info={"tenant": 1}) as session:
                        assert await seen_async(session) == (["ann"], "ann")
                    async with factory(info={"tenant": 2}) as session:
                        assert await seen_async(session) == (["bob"], None)
                    async with factory(info={"tenant": 2}) as session:  # the same entries
                        assert await session.run_sync(seen) == (["bob"], None)
                    assert counter.take() == expected_sql
            finally:
                event.remove(Session, "do_orm_execute", only_the_tenants_user)

    asyncio.run(main())


SCHEMAS = (("t1", "ann"), ("t2", "tom"))


def with_schemas(engine: Any) -> Any:
    """SQLite has no CREATE SCHEMA: its schemas are databases attached to each connection
    (files beside the main one), as in tests/sqladiffmodels.py."""
    sync_engine = getattr(engine, "sync_engine", engine)
    if sync_engine.dialect.name == "sqlite":
        folder = Path(sync_engine.url.database).parent

        @event.listens_for(sync_engine, "connect")
        def attach(dbapi_connection: Any, record: Any) -> None:
            cursor = dbapi_connection.cursor()
            for schema, _ in SCHEMAS:
                cursor.execute(f"ATTACH DATABASE '{folder / schema}.db' AS {schema}")
            cursor.close()

    return engine


def plant_schemas(url: str) -> None:
    """Each tenant's schema holds a users table whose user 1 has a name of its own."""
    engine = with_schemas(create_engine(url))
    with engine.begin() as conn:
        for schema, name in SCHEMAS:
            if engine.dialect.name == "postgresql":
                conn.execute(text(f"CREATE SCHEMA {schema}"))
            mapped = conn.execution_options(schema_translate_map={None: schema})
            Base.metadata.create_all(mapped)
            mapped.execute(text(f"INSERT INTO {schema}.users VALUES (1, '{name}', 'FREE', '{{}}')"))
    engine.dispose()


def test_a_schema_per_tenant(db_url: str, standalone: Any) -> None:
    plant_schemas(db_url)
    engine = with_schemas(create_engine(db_url))
    factories = {}
    for schema in ("t1", "t2"):  # one engine per tenant, one namespace
        tenant_engine = engine.execution_options(schema_translate_map={None: schema})
        factories[schema] = sessionmaker(tenant_engine)
        QueryCache(standalone.sync(), "schemas").attach(factories[schema])
    shared = sessionmaker(engine)
    QueryCache(standalone.sync(), "schemas").attach(shared)
    counter = Counter(engine)

    for round_ in ("misses", "hits"):
        for schema, name in SCHEMAS:
            with factories[schema]() as session:
                assert seen(session) == ([name], name), f"tenant {schema} got another's rows"
            with shared() as session:  # the map given per call
                assert seen(session, schema_translate_map={None: schema}) == ([name], name)
        with shared() as session:
            assert seen(session) == (["ann", "bob"], "ann")
        assert (counter.take() == 0) == (round_ == "hits")
    engine.dispose()


def test_asyncio_schema_per_tenant(db_url: str, standalone: Any) -> None:
    plant_schemas(db_url)

    async def main() -> None:
        engine = with_schemas(create_async_engine(async_url(db_url)))
        client = standalone.aio()
        factories = {}
        for schema, _ in SCHEMAS:
            tenant_engine = engine.execution_options(schema_translate_map={None: schema})
            factories[schema] = async_sessionmaker(tenant_engine)
            AsyncQueryCache(client, "schemas").attach(factories[schema])
        shared = AsyncQueryCache(client, "schemas").attach(async_sessionmaker(engine))
        counter = Counter(engine)
        try:
            for round_ in ("misses", "hits"):
                for schema, name in SCHEMAS:
                    async with factories[schema]() as session:
                        assert await seen_async(session) == ([name], name), schema
                    async with shared() as session:
                        mapped = {None: schema}
                        assert await seen_async(session, schema_translate_map=mapped) == (
                            [name],
                            name,
                        )
                async with shared() as session:
                    assert await seen_async(session) == (["ann", "bob"], "ann")
                assert (counter.take() == 0) == (round_ == "hits")
        finally:
            await client.aclose()
            await engine.dispose()

    asyncio.run(main())


def test_the_context_of_a_key() -> None:
    db = "postgresql://app@db/shop"
    plain = _keys.context_text(db, {"yield_per": 10, "_sa_orm_load_options": object()})
    assert plain == db, "fetching options and SQLAlchemy's private ones change no row"
    assert _keys.context_text(db, {"prebuffer_rows": True}) == db, "AsyncSession.execute's"
    used = {None: "t1", "_none": "t1"}  # as SQLAlchemy leaves a map it has used
    assert _keys.context_text(db, {"schema_translate_map": used}) == _keys.context_text(
        db, {"schema_translate_map": {None: "t1"}}
    )
    assert _keys.context_text(db, {"tenant": 1}) != _keys.context_text(db, {"tenant": 2})
    assert _keys.context_text(db, {"tenant": object()}) is None, "not plain: not cached"
