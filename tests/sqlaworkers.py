"""Models and worker functions for the seawall.sqlalchemy tests (importable by spawned
processes, which is why they live outside the test modules)."""

from __future__ import annotations

import enum
from typing import Any

import redis
from sqlalchemy import JSON, Column, ForeignKey, PickleType, Table, create_engine, event, select
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship, sessionmaker

from seawall.sqlalchemy import QueryCache, cached


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
