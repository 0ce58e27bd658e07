"""Models and rows of the differential test (tests/test_sqla_differential.py): a
self-referential tree, joined-table and single-table inheritance, and tables in a schema
per tenant; next to sqlaworkers' users and addresses."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from sqlalchemy import (
    ForeignKey,
    create_engine,
    event,
    text,
)
from sqlalchemy.orm import (
    DeclarativeBase,
    Mapped,
    mapped_column,
    relationship,
    sessionmaker,
)
from sqlaworkers import Address, User

# -- models ------------------------------------------------------------------------------


class DiffBase(DeclarativeBase):
    pass


class Node(DiffBase):
    """A self-referential tree, loaded two levels deep by every read of a node."""

    __tablename__ = "nodes"
    id: Mapped[int] = mapped_column(primary_key=True)
    parent_id: Mapped[int | None] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"))
    label: Mapped[str]
    children: Mapped[list[Node]] = relationship(
        lazy="selectin", join_depth=2, order_by="Node.id", passive_deletes=True
    )


class Employee(DiffBase):
    """Joined-table inheritance: Engineer and Manager add a table each."""

    __tablename__ = "employees"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str]
    kind: Mapped[str]
    vehicles: Mapped[list[Vehicle]] = relationship(order_by="Vehicle.id", passive_deletes=True)
    __mapper_args__: ClassVar[dict[str, Any]] = {
        "polymorphic_on": "kind",
        "polymorphic_identity": "employee",
    }


class Manager(Employee):
    __tablename__ = "managers"
    id: Mapped[int] = mapped_column(
        ForeignKey("employees.id", ondelete="CASCADE"), primary_key=True
    )
    budget: Mapped[int]
    reports: Mapped[list[Engineer]] = relationship(
        back_populates="manager",
        foreign_keys="Engineer.manager_id",
        order_by="Engineer.id",
        passive_deletes=True,
    )
    __mapper_args__: ClassVar[dict[str, Any]] = {"polymorphic_identity": "manager"}


class Engineer(Employee):
    __tablename__ = "engineers"
    id: Mapped[int] = mapped_column(
        ForeignKey("employees.id", ondelete="CASCADE"), primary_key=True
    )
    language: Mapped[str]
    manager_id: Mapped[int | None] = mapped_column(ForeignKey("managers.id", ondelete="SET NULL"))
    manager: Mapped[Manager | None] = relationship(
        back_populates="reports", foreign_keys=[manager_id]
    )
    __mapper_args__: ClassVar[dict[str, Any]] = {
        "polymorphic_identity": "engineer",
        "polymorphic_load": "inline",
    }


class Vehicle(DiffBase):
    """Single-table inheritance: Car and Truck share the table."""

    __tablename__ = "vehicles"
    id: Mapped[int] = mapped_column(primary_key=True)
    kind: Mapped[str]
    wheels: Mapped[int]
    owner_id: Mapped[int | None] = mapped_column(ForeignKey("employees.id", ondelete="CASCADE"))
    __mapper_args__: ClassVar[dict[str, Any]] = {
        "polymorphic_on": "kind",
        "polymorphic_identity": "vehicle",
    }


class Car(Vehicle):
    doors: Mapped[int | None] = mapped_column(use_existing_column=True)
    __mapper_args__: ClassVar[dict[str, Any]] = {"polymorphic_identity": "car"}


class Truck(Vehicle):
    payload: Mapped[int | None] = mapped_column(use_existing_column=True)
    __mapper_args__: ClassVar[dict[str, Any]] = {"polymorphic_identity": "truck"}


class TenantBase(DeclarativeBase):
    pass


# A schema per tenant: the tables are declared in the schema "tenant", which each
# session maps to its tenant's schema (PostgreSQL schemas; SQLite attached databases).
TENANTS = ("tenant_a", "tenant_b")


class Account(TenantBase):
    __tablename__ = "accounts"
    __table_args__: ClassVar[dict[str, Any]] = {"schema": "tenant"}
    id: Mapped[int] = mapped_column(primary_key=True)
    owner: Mapped[str]
    balance: Mapped[int]
    entries: Mapped[list[Entry]] = relationship(
        lazy="selectin", order_by="Entry.id", passive_deletes=True
    )


class Entry(TenantBase):
    __tablename__ = "entries"
    __table_args__: ClassVar[dict[str, Any]] = {"schema": "tenant"}
    id: Mapped[int] = mapped_column(primary_key=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("tenant.accounts.id", ondelete="CASCADE"))
    amount: Mapped[int]


def in_schema(engine: Any, schema: str) -> Any:
    return engine.execution_options(schema_translate_map={"tenant": schema})


def add_tenant_rows(url: str) -> None:
    """Each tenant's schema, with rows of its own (a leak shows as the other's)."""
    engine = make_engine(url)
    for number, schema in enumerate(TENANTS, start=1):
        if engine.dialect.name == "postgresql":
            with engine.begin() as connection:
                connection.execute(text(f"CREATE SCHEMA {schema}"))
        TenantBase.metadata.create_all(in_schema(engine, schema))
        with sessionmaker(in_schema(engine, schema))() as session:
            for account_id in (1, 2, 3, 4):
                session.add(
                    Account(
                        id=account_id,
                        owner=f"{schema}-{account_id}",
                        balance=account_id * 10 * number,
                        entries=[Entry(id=account_id * 10, amount=number)],
                    )
                )
            session.commit()
    engine.dispose()


def add_rows(url: str) -> None:
    """The rows of DiffBase's tables, and more users and addresses than seed() makes."""
    engine = make_engine(url)
    DiffBase.metadata.create_all(engine)
    with sessionmaker(engine)() as session:
        session.add(
            Node(id=1, label="root", children=[Node(id=2, label="a"), Node(id=3, label="b")])
        )
        session.add(Node(id=5, label="other", children=[Node(id=6, label="c")]))
        session.flush()
        session.add(Node(id=4, parent_id=3, label="d"))
        session.add_all(
            [
                Manager(id=1, name="mia", budget=100),
                Manager(id=5, name="max", budget=50),
                Employee(id=4, name="eve"),
            ]
        )
        session.flush()
        session.add_all(
            [
                Engineer(id=2, name="eng", language="py", manager_id=1),
                Engineer(id=3, name="ed", language="rust", manager_id=1),
                Engineer(id=6, name="ela", language="py", manager_id=5),
            ]
        )
        session.flush()
        session.add_all(
            [
                Car(id=1, wheels=4, doors=5, owner_id=2),
                Car(id=2, wheels=4, doors=3, owner_id=1),
                Truck(id=3, wheels=6, payload=10, owner_id=2),
                Truck(id=4, wheels=18, payload=40, owner_id=None),
                Vehicle(id=5, wheels=2, owner_id=4),
            ]
        )
        session.commit()
    with sessionmaker(engine)() as session:
        for user_id in (3, 4, 5):
            session.add(User(id=user_id, name=f"user{user_id}"))
        session.flush()
        for address_id in (11, 12, 13, 14):
            session.add(Address(id=address_id, user_id=address_id - 9, email=f"a{address_id}"))
        session.commit()
    engine.dispose()
    add_tenant_rows(url)


def make_engine(url: str) -> Any:
    engine = create_engine(url)
    if engine.dialect.name == "sqlite":
        folder = Path(engine.url.database or ".").parent

        @event.listens_for(engine, "connect")
        def cascade(dbapi_connection: Any, record: Any) -> None:
            dbapi_connection.execute("PRAGMA foreign_keys = ON")
            for schema in TENANTS:  # SQLite's schemas: attached databases
                dbapi_connection.execute(f"ATTACH DATABASE '{folder / schema}.db' AS {schema}")

    return engine
