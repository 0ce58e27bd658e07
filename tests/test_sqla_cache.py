"""seawall.sqlalchemy.QueryCache on SQLite: hits run no SQL, commits invalidate, rollbacks
and open transactions do not, results are plain data, bad input is refused.

Redis is real (one server and the 3+3 cluster); SQLite is a file per test.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from sqlalchemy import create_engine, delete, insert, select, text, update
from sqlalchemy.orm import aliased, defer, joinedload, selectinload, sessionmaker
from sqlaworkers import Address, Base, Blob, Counter, Tag, Tier, User, seed

from seawall.errors import CacheSerializationError
from seawall.sqlalchemy import QueryCache, _keys, _tables, cached


@pytest.fixture
def db(tmp_path: Any) -> Iterator[Any]:
    engine = create_engine(f"sqlite:///{tmp_path / 'shop.db'}")
    Base.metadata.create_all(engine)
    with sessionmaker(engine)() as session:
        seed(session)
    yield engine
    engine.dispose()


def make(engine: Any, client: Any, **options: Any) -> tuple[Any, QueryCache, Counter]:
    factory = sessionmaker(engine)
    cache = QueryCache(client, "shop", **options)
    cache.attach(factory)
    return factory, cache, Counter(engine)


def names(session: Any) -> list[str]:
    query = select(User).order_by(User.id).options(cached())
    return [user.name for user in session.execute(query).scalars()]


def test_hit_runs_no_sql_and_only_a_commit_invalidates(db: Any, target: Any) -> None:
    factory, _, counter = make(db, target.sync())
    with factory() as session:
        assert names(session) == ["ann", "bob"]
        assert session.get(User, 1, options=[cached()]).name == "ann"
    assert counter.take() == 2  # both missed (the session holds instances weakly)
    with factory() as session:
        assert names(session) == ["ann", "bob"]
        assert session.get(User, 1, options=[cached()]).name == "ann"
        assert counter.take() == 0, "hits must not reach the database"
    with factory() as session:
        assert session.get(User, 2, options=[cached()]).tier is Tier.GOLD
    assert counter.take() == 1  # the first get of row 2
    with factory() as session:
        assert session.get(User, 2, options=[cached()]).tier is Tier.GOLD
    assert counter.take() == 0

    writer = factory()
    writer.get(User, 1).name = "anne"
    writer.flush()  # flushed, not committed
    with factory() as reader:
        assert names(reader) == ["ann", "bob"], "a reader sees the committed rows"
    assert counter.take() == 2  # the writer's get and UPDATE; the reader hit the cache
    assert names(writer) == ["anne", "bob"], "a session with writes reads the database"
    assert counter.take() == 1
    writer.commit()
    writer.close()
    counter.take()
    with factory() as reader:
        assert names(reader) == ["anne", "bob"]
        assert reader.get(User, 1, options=[cached()]).name == "anne"
    assert counter.take() == 2  # row 1 was written: its get misses too

    with factory() as rolled:
        rolled.get(User, 2).name = "robert"
        rolled.flush()
        rolled.rollback()
    counter.take()
    with factory() as reader:
        assert names(reader) == ["anne", "bob"]
        assert reader.get(User, 2, options=[cached()]).name == "bob"
    assert counter.take() == 0, "a rollback invalidates nothing"


def test_bulk_statements_and_inserts_invalidate(db: Any, standalone: Any) -> None:
    factory, _, counter = make(db, standalone.sync())
    with factory() as session:
        assert session.get(User, 3, options=[cached()]) is None  # cached as absent
        assert names(session) == ["ann", "bob"]
    with factory() as session:
        session.add(User(id=3, name="cy"))
        session.commit()
    with factory() as session:
        assert session.get(User, 3, options=[cached()]).name == "cy"
        assert names(session) == ["ann", "bob", "cy"]

    with factory() as session:
        session.execute(update(User).where(User.id == 3).values(name="cyd"))
        session.commit()
    counter.take()
    with factory() as session:
        assert session.get(User, 3, options=[cached()]).name == "cyd"
        assert names(session) == ["ann", "bob", "cyd"]
    assert counter.take() == 2

    with factory() as session:
        session.execute(delete(User).where(User.id == 3))
        session.execute(insert(Tag).values(id=6, label="new"))
        session.commit()
    with factory() as session:
        assert session.get(User, 3, options=[cached()]) is None
        assert names(session) == ["ann", "bob"]


def test_get_is_invalidated_per_row(db: Any, standalone: Any) -> None:
    factory, _, counter = make(db, standalone.sync())
    for user_id in (1, 2):
        with factory() as session:
            session.get(User, user_id, options=[cached()])
    with factory() as session:
        names(session)
    with factory() as session:
        session.get(User, 2).name = "bobby"
        session.commit()
    counter.take()
    with factory() as session:
        assert session.get(User, 1, options=[cached()]).name == "ann"
    assert counter.take() == 0, "a write to row 2 keeps the cached get of row 1"
    with factory() as session:
        assert session.get(User, 2, options=[cached()]).name == "bobby"
    with factory() as session:
        assert names(session) == ["ann", "bobby"]
    assert counter.take() == 2


def test_results_are_plain_data_with_loaded_relationships_only(db: Any, standalone: Any) -> None:
    factory, _, counter = make(db, standalone.sync())
    eager = select(User).order_by(User.id).options(selectinload(User.addresses), cached())
    with factory() as session:
        session.execute(eager).scalars().all()
        session.execute(select(User).order_by(User.id).options(cached())).scalars().all()
    counter.take()
    with factory() as session:
        users = session.execute(eager).scalars().all()
        assert [a.email for a in users[0].addresses] == ["ann@example.com"]
        assert users[0].addresses[0].user is users[0]
        assert counter.take() == 0, "loaded relationships come from the cache"
        users[0].prefs["lang"] = "fr"  # mutated in place, never flushed
    joined = select(User).order_by(User.id).options(joinedload(User.addresses), cached())
    for expected_sql in (1, 0):
        with factory() as session:
            users = session.execute(joined).unique().scalars().all()
            assert [len(u.addresses) for u in users] == [1, 0]
        assert counter.take() == expected_sql
    with factory() as session:
        assert session.execute(eager).scalars().first().prefs == {"lang": "en"}
    deferred = select(User).order_by(User.id).options(defer(User.name), cached())
    with factory() as session:
        session.execute(deferred).scalars().all()
    counter.take()
    with factory() as session:
        users = session.execute(deferred).scalars().all()
        assert counter.take() == 0
        assert users[1].name == "bob"  # a deferred column loads on access, as usual
        assert counter.take() == 1
    with factory() as session:
        users = session.execute(select(User).order_by(User.id).options(cached())).scalars().all()
        assert counter.take() == 0
        assert [t.label for t in users[1].tags] == ["vip"]  # not cached: lazy-loaded
        assert counter.take() == 1
        users[1].name = "b2"  # instances are persistent in the session: writes work
        session.commit()
    with factory() as session:
        assert names(session) == ["ann", "b2"]
    # An address change invalidates the query that loaded addresses eagerly.
    with factory() as session:
        session.get(Address, 10).email = "a@new.example"
        session.commit()
    with factory() as session:
        users = session.execute(eager).scalars().all()
        assert users[0].addresses[0].email == "a@new.example"


def test_bad_input(db: Any, standalone: Any, caplog: Any) -> None:
    factory, cache, _ = make(db, standalone.sync())
    with factory() as session:
        with pytest.raises(TypeError, match="SELECT statements"):
            session.execute(update(User).values(name="x").options(cached()))
        session.add(Blob(id=1, data={1, 2}))
        session.commit()
        with pytest.raises(CacheSerializationError, match=r"Blob\.data.*set"):
            session.execute(select(Blob).options(cached())).scalars().all()
    with pytest.raises(ValueError, match="already has a QueryCache"):
        cache.attach(factory)
    with pytest.raises(TypeError, match="sessionmaker"):
        cache.attach(object())
    with pytest.raises(ValueError, match="ttl of cached"):
        cached(ttl=-1)
    with pytest.raises(TypeError, match="bloom= does not apply"):
        QueryCache(standalone.sync(), "shop2", bloom=object())


def test_textual_writes_and_invalidate(db: Any, standalone: Any) -> None:
    factory, cache, counter = make(db, standalone.sync())
    with factory() as session:
        names(session)
        session.execute(text("SELECT 1"))  # a read: does not mark the session
        assert names(session) == ["ann", "bob"]
    counter.take()
    with factory() as session:
        session.execute(text("UPDATE users SET name = 'zed' WHERE id = 1"))
        session.commit()
    with factory() as session:
        assert names(session) == ["zed", "bob"], "a textual write invalidates everything"
    with factory() as session:  # through the session's connection, not its execute()
        session.connection().execute(text("UPDATE users SET name = 'zia' WHERE id = 1"))
        session.commit()
    with factory() as session:
        assert names(session) == ["zia", "bob"]
    with factory() as session:
        assert session.get(User, 2, options=[cached()]).name == "bob"
    with factory() as session:  # the legacy bulk methods write through it too
        session.bulk_update_mappings(User, [{"id": 2, "name": "bo"}])
        session.commit()
    with factory() as session:
        assert session.get(User, 2, options=[cached()]).name == "bo"
        assert names(session) == ["zia", "bo"]
    with db.begin() as conn:  # outside any session: seawall sees nothing
        conn.execute(text("UPDATE users SET name = 'zoe' WHERE id = 1"))
    with factory() as session:
        assert names(session) == ["zia", "bo"]
    cache.invalidate(User)
    with factory() as session:
        assert names(session) == ["zoe", "bo"]


def test_redis_down_reads_the_database(db: Any, seawall_server_factory: Any, caplog: Any) -> None:
    server = seawall_server_factory()
    client = redis.Redis.from_url(server.url, socket_timeout=0.5, socket_connect_timeout=0.5)
    factory, _, counter = make(db, client, l1_size=0, hot_keys=0)  # reads reach Redis
    with factory() as session:
        assert names(session) == ["ann", "bob"]
    server.stop()
    with caplog.at_level(logging.WARNING, logger="seawall.sqlalchemy"), factory() as session:
        assert names(session) == ["ann", "bob"]
        assert "Redis is unreachable" in caplog.text
        session.get(User, 1).name = "ann2"
        session.commit()  # committed; the invalidation failure is logged, not raised
        assert "could not invalidate" in caplog.text
    with factory() as session:
        assert names(session) == ["ann2", "bob"]
    assert counter.take() >= 3


def test_keys_are_stable_and_name_every_table() -> None:
    def build() -> Any:
        return (
            select(User)
            .where(User.id.in_(select(Address.user_id).where(Address.email.like("%@x"))))
            .options(selectinload(User.tags))
        )

    first, second = build(), build()
    text_one = _keys.normalize(first._generate_cache_key().key)
    assert text_one == _keys.normalize(second._generate_cache_key().key)
    assert " at 0x" not in text_one
    assert text_one != _keys.normalize(select(User)._generate_cache_key().key)
    tables = _tables.read_tables(first, [User.__mapper__])
    assert tables == {"users", "addresses", "user_tags", "tags"}
    assert _tables.read_tables(select(Tag), [Tag.__mapper__]) == {"tags"}
    assert "users" in _tables.read_tables(select(aliased(User).name), [])
    assert _tables.written_tables([User.__mapper__]) == {"users", "user_tags"}
    assert _keys.row_key((7, "eu")) == "7:eu"
    assert _keys.is_read_only_text(" select * from users ")
    for sql in ("update users set a = 1", "select 1; delete from users", "select * into t"):
        assert not _keys.is_read_only_text(sql)
    assert _keys.fingerprint("s", "x", [1]) != _keys.fingerprint("s", "x", [2])


def test_cascades_are_found_from_the_orms_copy_of_a_table() -> None:
    """An ORM delete(User) compiles against an annotated copy of `users`, equal to the
    Table but not the object its foreign keys point at; its answer must not be empty, nor
    be remembered for the Table itself."""
    copy = delete(User).where(User.id == 1).table
    assert copy is not User.__table__ and copy == User.__table__
    assert _tables.cascaded_tables(copy) == {"addresses"}
    assert _tables.cascaded_tables(User.__table__) == {"addresses"}
