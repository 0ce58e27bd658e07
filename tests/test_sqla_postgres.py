"""seawall.sqlalchemy on a private PostgreSQL: the reader/writer race, two processes,
REPEATABLE READ, and AsyncQueryCache on AsyncSession (one server and the cluster)."""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import threading
import time
from typing import Any

import redis.asyncio
from sqlalchemy import create_engine, event, select
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
from sqlalchemy.orm import sessionmaker
from sqlaworkers import Counter, User, rename_in_child

from seawall.sqlalchemy import AsyncQueryCache, QueryCache, cached


def names(session: Any) -> list[str]:
    query = select(User).order_by(User.id).options(cached())
    return [user.name for user in session.execute(query).scalars()]


def test_a_read_from_before_the_commit_is_never_served_after_it(
    pg_url: str, standalone: Any
) -> None:
    """The reader reads the table's token and the old row, then stalls; the writer commits
    (deleting the token); the reader then stores its old result. Nobody may get it."""
    engine = create_engine(pg_url)
    factory = sessionmaker(engine)
    QueryCache(standalone.sync(), "race").attach(factory)
    counter = Counter(engine)
    stalled, resume = threading.Event(), threading.Event()
    reader_thread: list[threading.Thread] = []

    @event.listens_for(engine, "after_cursor_execute")
    def stall(*args: Any) -> None:
        if reader_thread and threading.current_thread() is reader_thread[0]:
            stalled.set()
            assert resume.wait(10)

    seen: list[list[str]] = []

    def read() -> None:
        with factory() as session:
            seen.append(names(session))

    reader_thread.append(threading.Thread(target=read))
    reader_thread[0].start()
    assert stalled.wait(10), "the reader never queried"
    with factory() as writer:
        writer.get(User, 1).name = "anne"
        writer.commit()
    resume.set()
    reader_thread[0].join(10)
    assert seen == [["ann", "bob"]]  # what it read before the commit...
    counter.take()
    with factory() as session:
        assert names(session) == ["anne", "bob"]  # ...is not what anyone reads after it
    assert counter.take() == 1
    with factory() as session:
        assert names(session) == ["anne", "bob"]
    assert counter.take() == 0

    # The writer stalls between its flushed UPDATE and COMMIT; a reader meanwhile reads
    # and stores the old rows. Tokens replaced before the COMMIT would let it keep them.
    writer_thread: list[threading.Thread] = []
    committing, go_on = threading.Event(), threading.Event()

    @event.listens_for(engine, "commit")
    def hold(conn: Any) -> None:
        if writer_thread and threading.current_thread() is writer_thread[0]:
            committing.set()
            assert go_on.wait(10)

    def write() -> None:
        with factory() as writer:
            writer.get(User, 2).name = "bobby"
            writer.commit()

    writer_thread.append(threading.Thread(target=write))
    writer_thread[0].start()
    assert committing.wait(10)
    with factory() as session:
        assert names(session) == ["anne", "bob"]  # read committed: the old row
    go_on.set()
    writer_thread[0].join(10)
    with factory() as session:
        assert names(session) == ["anne", "bobby"]
    engine.dispose()


def test_another_process_shares_and_invalidates(pg_url: str, standalone: Any) -> None:
    engine = create_engine(pg_url)
    strict = sessionmaker(engine)  # no L1: every read asks Redis for the tokens
    QueryCache(standalone.sync(), "procs", l1_size=0, hot_keys=0).attach(strict)
    usual = sessionmaker(engine)
    QueryCache(standalone.sync(), "procs").attach(usual)
    for factory in (strict, usual):
        with factory() as session:
            assert names(session) == ["ann", "bob"]
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        reads = pool.apply(rename_in_child, (pg_url, standalone.url, "procs", 1, "anne"))
    assert reads == 0, "the other process was served from the cache"
    with strict() as session:
        assert names(session) == ["anne", "bob"], "stale after the writer's commit returned"
    # With the L1, the token is dropped by the invalidation broadcast (about a millisecond).
    deadline = time.monotonic() + 2.0
    while True:
        with usual() as session:
            if names(session) == ["anne", "bob"] or time.monotonic() > deadline:
                break
    with usual() as session:
        assert names(session) == ["anne", "bob"]
    engine.dispose()


def test_repeatable_read_uses_the_cache_only_for_a_fresh_snapshot(
    pg_url: str, standalone: Any
) -> None:
    engine = create_engine(pg_url, isolation_level="REPEATABLE READ")
    factory = sessionmaker(engine)
    QueryCache(standalone.sync(), "rr").attach(factory)
    counter = Counter(engine)
    with factory() as session:
        names(session)
    counter.take()
    with factory() as session:
        assert names(session) == ["ann", "bob"]
        assert counter.take() == 0, "first statement of the transaction: served"
        session.execute(select(User.id).where(User.id == 2)).all()
        counter.take()
        assert names(session) == ["ann", "bob"]
        assert counter.take() == 1, "inside a snapshot: the database answers"
    engine.dispose()


def test_async_session(pg_url: str, target: Any) -> None:
    async def main() -> None:
        engine = create_async_engine(pg_url.replace("+psycopg", "+psycopg_async"))
        counter = Counter(engine)
        client = target.aio()
        factory = AsyncQueryCache(client, "aio").attach(async_sessionmaker(engine))
        query = select(User).order_by(User.id).options(cached())
        try:
            for expected_sql in (1, 0):
                async with factory() as session:
                    users = (await session.execute(query)).scalars().all()
                    assert [u.name for u in users] == ["ann", "bob"]
                    got = await session.get(User, 2, options=[cached()])
                    assert got is users[1]
                assert counter.take() == expected_sql
            async with factory() as session:
                assert (await session.get(User, 2, options=[cached()])).name == "bob"
            counter.take()
            async with factory() as session:
                assert (await session.get(User, 2, options=[cached()])).name == "bob"
            assert counter.take() == 0
            async with factory() as session:
                user = await session.get(User, 1)
                user.name = "anne"
                await session.commit()
            async with factory() as session:
                users = (await session.execute(query)).scalars().all()
                assert [u.name for u in users] == ["anne", "bob"]
                assert (await session.get(User, 2, options=[cached()])).name == "bob"
            assert counter.take() == 3  # get(1), UPDATE, the query; get(2) stays cached
        finally:
            await client.aclose()
            await engine.dispose()

    asyncio.run(main())


def test_a_released_savepoint_is_not_a_commit(pg_url: str, standalone: Any) -> None:
    engine = create_engine(pg_url)
    factory = sessionmaker(engine)
    QueryCache(standalone.sync(), "nested").attach(factory)
    with factory() as session:
        names(session)
        session.get(User, 2, options=[cached()])
    writer = factory()
    with writer.begin_nested():
        writer.get(User, 1).name = "anne"
    # SAVEPOINT released, transaction open: other readers still get the committed rows
    with factory() as session:
        assert names(session) == ["ann", "bob"]
    counter = Counter(engine)
    writer.commit()
    writer.close()
    with factory() as session:
        assert names(session) == ["anne", "bob"]
        assert session.get(User, 2, options=[cached()]).name == "bob"
    assert counter.take() == 1, "SAVEPOINTs are not writes: row 2's get stays cached"
    locking = select(User).order_by(User.id).with_for_update().options(cached())
    for _ in range(2):
        with factory() as session:
            assert len(session.execute(locking).scalars().all()) == 2
    assert counter.take() == 2, "FOR UPDATE must take its row locks in the database"
    engine.dispose()


def test_async_redis_down_reads_the_database(
    pg_url: str, seawall_server_factory: Any, caplog: Any
) -> None:
    server = seawall_server_factory()

    async def main() -> None:
        engine = create_async_engine(pg_url.replace("+psycopg", "+psycopg_async"))
        client = redis.asyncio.Redis.from_url(server.url, socket_timeout=0.5)
        cache = AsyncQueryCache(client, "down", l1_size=0, hot_keys=0)  # reads reach Redis
        factory = cache.attach(async_sessionmaker(engine))
        query = select(User).order_by(User.id).options(cached())
        try:
            async with factory() as session:
                assert len((await session.execute(query)).scalars().all()) == 2
            server.stop()
            async with factory() as session:
                users = (await session.execute(query)).scalars().all()
                assert [u.name for u in users] == ["ann", "bob"]
                users[0].name = "anne"
                await session.commit()  # the failed invalidation is logged, not raised
        finally:
            await client.aclose()
            await engine.dispose()

    with caplog.at_level(logging.WARNING, logger="seawall.sqlalchemy"):
        asyncio.run(main())
    assert "Redis is unreachable" in caplog.text
    assert "could not invalidate" in caplog.text
