"""seawall.sqlalchemy: one tenant never reads another's cached rows. SQLAlchemy's
multi-tenant recipes: with_loader_criteria added by a do_orm_execute listener registered
after attach() (on the factory, or on every Session), and a schema per tenant with
schema_translate_map (on the engine, or per call); for queries and for session.get."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import create_engine, event, select, text
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
from sqlalchemy.orm import ORMExecuteState, Session, sessionmaker, with_loader_criteria
from sqlaworkers import Base, Counter, User

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


def test_asyncio_loader_criteria(pg_url: str, standalone: Any) -> None:
    async def main() -> None:
        engine = create_async_engine(pg_url.replace("+psycopg", "+psycopg_async"))
        client = standalone.aio()
        factory = AsyncQueryCache(client, "tenants").attach(async_sessionmaker(engine))
        event.listen(Session, "do_orm_execute", only_the_tenants_user)
        try:
            for _ in range(2):
                for tenant, expected in ((1, (["ann"], "ann")), (2, (["bob"], None))):
                    async with factory(info={"tenant": tenant}) as session:
                        assert await session.run_sync(seen) == expected
        finally:
            event.remove(Session, "do_orm_execute", only_the_tenants_user)
            await client.aclose()
            await engine.dispose()

    asyncio.run(main())


def test_a_schema_per_tenant(pg_url: str, standalone: Any) -> None:
    engine = create_engine(pg_url)
    with engine.begin() as conn:
        for schema, name in (("t1", "ann"), ("t2", "tom")):
            conn.execute(text(f"CREATE SCHEMA {schema}"))
            mapped = conn.execution_options(schema_translate_map={None: schema})
            Base.metadata.create_all(mapped)
            mapped.execute(text(f"INSERT INTO {schema}.users VALUES (1, '{name}', 'FREE', '{{}}')"))
    factories = {}
    for schema in ("t1", "t2"):  # one engine per tenant, one namespace
        tenant_engine = engine.execution_options(schema_translate_map={None: schema})
        factories[schema] = sessionmaker(tenant_engine)
        QueryCache(standalone.sync(), "schemas").attach(factories[schema])
    shared = sessionmaker(engine)
    QueryCache(standalone.sync(), "schemas").attach(shared)
    counter = Counter(engine)

    for round_ in ("misses", "hits"):
        for schema, name in (("t1", "ann"), ("t2", "tom")):
            with factories[schema]() as session:
                assert seen(session) == ([name], name), f"tenant {schema} got another's rows"
            with shared() as session:  # the map given per call
                assert seen(session, schema_translate_map={None: schema}) == ([name], name)
        with shared() as session:
            assert seen(session) == (["ann", "bob"], "ann")
        assert (counter.take() == 0) == (round_ == "hits")
    engine.dispose()


def test_the_context_of_a_key() -> None:
    db = "postgresql://app@db/shop"
    plain = _keys.context_text(db, {"yield_per": 10, "_sa_orm_load_options": object()})
    assert plain == db, "fetching options and SQLAlchemy's private ones change no row"
    used = {None: "t1", "_none": "t1"}  # as SQLAlchemy leaves a map it has used
    assert _keys.context_text(db, {"schema_translate_map": used}) == _keys.context_text(
        db, {"schema_translate_map": {None: "t1"}}
    )
    assert _keys.context_text(db, {"tenant": 1}) != _keys.context_text(db, {"tenant": 2})
    assert _keys.context_text(db, {"tenant": object()}) is None, "not plain: not cached"
