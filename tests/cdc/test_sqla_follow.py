"""`seawall follow` invalidates seawall.sqlalchemy's cached session.get() per row: a write
made outside the ORM (here plain SQL) reaches every process's cached get of that row."""

from __future__ import annotations

from typing import Any

import redis
from sqlalchemy import String, create_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, sessionmaker

from cdc.helpers import wait_until
from seawall.sqlalchemy import QueryCache, cached


class Base(DeclarativeBase):
    pass


class Member(Base):
    __tablename__ = "users"
    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str] = mapped_column(String(200))
    name: Mapped[str] = mapped_column(String(200))


def test_follow_invalidates_cached_gets_by_row(
    pg_database: Any, seawall_url: str, run_follower: Any
) -> None:
    pg_database.execute("INSERT INTO users VALUES (1, 'a@x', 'Ann'), (2, 'b@x', 'Bob')")
    writer = redis.Redis.from_url(seawall_url)
    follower = run_follower(pg_database.url, writer, ["users=shop.users"], status_interval=0.2)
    wait_until(lambda: follower.status().streaming, 15, "the follower streams")
    server = pg_database.server
    engine = create_engine(
        f"postgresql+psycopg://postgres@{server.host}:{server.port}/{pg_database.name}"
    )
    factory = sessionmaker(engine)
    QueryCache(redis.Redis.from_url(seawall_url), "shop").attach(factory)

    def name(user_id: int) -> str | None:
        with factory() as session:
            found = session.get(Member, user_id, options=[cached()])
            return None if found is None else found.name

    assert (name(1), name(2), name(3)) == ("Ann", "Bob", None)
    pg_database.execute("UPDATE users SET name = 'Anna' WHERE id = 1")
    pg_database.execute("INSERT INTO users VALUES (3, 'c@x', 'Cy')")
    wait_until(lambda: name(1) == "Anna", 10, "the update reaches the cached get")
    wait_until(lambda: name(3) == "Cy", 10, "the insert voids the cached absent")
    assert name(2) == "Bob"
    engine.dispose()
    writer.close()
