"""Models and worker functions for the seawall.sqlalchemy tests (importable by spawned
processes, which is why they live outside the test modules)."""

from __future__ import annotations

import contextlib
import enum
from collections.abc import AsyncIterator
from typing import Any

import redis
from sqlalchemy import JSON, Column, ForeignKey, PickleType, Table, create_engine, event, select
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship, sessionmaker

from seawall.sqlalchemy import AsyncQueryCache, QueryCache, cached


class Base(DeclarativeBase):
    pass


class Tier(enum.Enum):
    FREE = "free"
    GOLD = "gold"


user_tags = Table(
    "user_tags",
    Base.metadata,
    Column("user_id", ForeignKey("users.id"), primary_key=True),
    Column("tag_id", ForeignKey("tags.id"), primary_key=True),
)


class User(Base):
    __tablename__ = "users"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str]
    tier: Mapped[Tier] = mapped_column(default=Tier.FREE)
    prefs: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    addresses: Mapped[list[Address]] = relationship(back_populates="user")
    tags: Mapped[list[Tag]] = relationship(secondary=user_tags)


class Address(Base):
    __tablename__ = "addresses"
    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    email: Mapped[str]
    user: Mapped[User] = relationship(back_populates="addresses")


class Tag(Base):
    __tablename__ = "tags"
    id: Mapped[int] = mapped_column(primary_key=True)
    label: Mapped[str]


class Blob(Base):
    """A column whose values are not plain data (a pickled Python set)."""

    __tablename__ = "blobs"
    id: Mapped[int] = mapped_column(primary_key=True)
    data: Mapped[Any] = mapped_column(PickleType)


class Counter:
    """Counts the SQL statements an engine sends (a hit must send none)."""

    def __init__(self, engine: Any) -> None:
        self.count = 0
        target = getattr(engine, "sync_engine", engine)
        event.listen(target, "before_cursor_execute", self._seen)

    def _seen(self, *args: Any) -> None:
        self.count += 1

    def take(self) -> int:
        seen, self.count = self.count, 0
        return seen


def seed(session: Any) -> None:
    session.add_all(
        [
            User(
                id=1,
                name="ann",
                prefs={"lang": "en"},
                addresses=[Address(id=10, email="ann@example.com")],
            ),
            User(id=2, name="bob", tier=Tier.GOLD, tags=[Tag(id=5, label="vip")]),
        ]
    )
    session.commit()


def rename_in_child(db_url: str, redis_url: str, namespace: str, user_id: int, name: str) -> int:
    """A second process: read the parent's cached query (SQL statements it needed are
    returned), then rename a user and commit; returns after the commit returned."""
    engine = create_engine(db_url)
    counter = Counter(engine)
    factory = sessionmaker(engine)
    QueryCache(redis.Redis.from_url(redis_url), namespace).attach(factory)
    with factory() as session:
        session.execute(select(User).order_by(User.id).options(cached())).scalars().all()
        reads = counter.take()
    with factory() as session:
        user = session.get(User, user_id)
        assert user is not None
        user.name = name
        session.commit()
    engine.dispose()
    return reads


def async_url(url: str) -> str:
    """The asyncio twin of a sync test's URL: psycopg's async mode, aiosqlite."""
    return url.replace("postgresql+psycopg:", "postgresql+psycopg_async:").replace(
        "sqlite:", "sqlite+aiosqlite:", 1
    )


def enforce_foreign_keys(engine: Any) -> None:
    """SQLite applies ON DELETE CASCADE only with PRAGMA foreign_keys on, per connection."""
    target = getattr(engine, "sync_engine", engine)
    if target.dialect.name == "sqlite":

        @event.listens_for(target, "connect")
        def on(dbapi_connection: Any, record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA foreign_keys = ON")
            cursor.close()


@contextlib.asynccontextmanager
async def async_cached(
    url: str, target: Any, namespace: str, *, engine_options: Any = None, **session_options: Any
) -> AsyncIterator[Any]:
    """An async_sessionmaker on `url` (a sync test's URL) attached to an AsyncQueryCache
    on the target's Redis; the engine and client are closed on leaving. Create it inside
    the running loop."""
    from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

    engine = create_async_engine(async_url(url), **(engine_options or {}))
    client = target.aio()
    try:
        factory = async_sessionmaker(engine, **session_options)
        yield AsyncQueryCache(client, namespace).attach(factory)
    finally:
        await client.aclose()
        await engine.dispose()
