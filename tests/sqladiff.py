"""The workload of tests/test_sqla_differential.py, importable by the spawned process that
takes part in it: its models, its reads and writes, one process's "world" (engine,
QueryCaches, sessions) and the loop that serves a peer process's steps.

Every step is drawn from a seed of its own (`op_seed`), so a step run by the peer process
is the very step the parent would have run, and the parent can run the same read without
a cache to compare."""

from __future__ import annotations

import random
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, ClassVar

import redis
from sqlalchemy import (
    ForeignKey,
    create_engine,
    delete,
    event,
    func,
    insert,
    literal,
    select,
    text,
    update,
)
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import (
    DeclarativeBase,
    Mapped,
    ORMExecuteState,
    joinedload,
    mapped_column,
    relationship,
    selectin_polymorphic,
    selectinload,
    sessionmaker,
    with_loader_criteria,
    with_polymorphic,
)
from sqlaworkers import Address, User

import seawall
from seawall.cache._l1 import MISSING
from seawall.sqlalchemy import QueryCache, cached

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


# -- reads -------------------------------------------------------------------------------


def users_plain(session: Any, *options: Any) -> Any:
    query = select(User).order_by(User.id).options(*options)
    return [(u.id, u.name) for u in session.execute(query).scalars()]


def users_with_addresses(session: Any, loader: Callable[..., Any], *options: Any) -> Any:
    query = select(User).order_by(User.id).options(loader(User.addresses), *options)
    return [
        (u.id, u.name, sorted(a.email for a in u.addresses))
        for u in session.execute(query).unique().scalars()
    ]


def emails_of(session: Any, user_id: int, *options: Any) -> Any:
    query = select(Address.email).where(Address.user_id == user_id).options(*options)
    return sorted(session.execute(query.order_by(Address.id)).scalars())


def joined(session: Any, *options: Any) -> Any:
    query = select(User.name, Address.email).join(User.addresses).options(*options)
    return [tuple(row) for row in session.execute(query.order_by(Address.id))]


def got_user(session: Any, user_id: int, *options: Any) -> Any:
    user = session.get(User, user_id, options=list(options))
    return None if user is None else (user.name, sorted(a.email for a in user.addresses))


def got_address(session: Any, address_id: int, *options: Any) -> Any:
    found = session.get(Address, address_id, options=list(options))
    return None if found is None else (found.email, found.user_id)


def tree_of(node: Node | None) -> Any:
    if node is None:
        return None
    return (
        node.id,
        node.label,
        [(c.id, c.label, [g.id for g in c.children]) for c in node.children],
    )


def got_node(session: Any, node_id: int, *options: Any) -> Any:
    return tree_of(session.get(Node, node_id, options=list(options)))


def roots(session: Any, *options: Any) -> Any:
    query = select(Node).where(Node.parent_id.is_(None)).order_by(Node.id).options(*options)
    return [tree_of(node) for node in session.execute(query).scalars()]


def employee_of(found: Any) -> Any:
    if found is None:
        return None
    return (
        found.id,
        type(found).__name__,
        found.name,
        getattr(found, "language", None),
        getattr(found, "budget", None),
        getattr(found, "manager_id", None),
    )


def vehicle_of(found: Any) -> Any:
    if found is None:
        return None
    return (
        found.id,
        type(found).__name__,
        found.wheels,
        getattr(found, "doors", None),
        getattr(found, "payload", None),
        found.owner_id,
    )


def employees(session: Any, how: str, *options: Any) -> Any:
    """Every employee, polymorphically: the subclasses' tables by a LEFT OUTER JOIN
    (with_polymorphic), by a SELECT per subclass (selectin_polymorphic), or by a load
    per instance on first access (the plain query)."""
    if how == "with_polymorphic":
        entity: Any = with_polymorphic(Employee, "*")
        query = select(entity).order_by(entity.id)
    elif how == "selectin_polymorphic":
        query = select(Employee).options(selectin_polymorphic(Employee, [Engineer, Manager]))
        query = query.order_by(Employee.id)
    else:
        query = select(Employee).order_by(Employee.id)
    return [employee_of(e) for e in session.execute(query.options(*options)).scalars()]


def engineers_of(session: Any, language: str, *options: Any) -> Any:
    query = select(Engineer).where(Engineer.language == language).order_by(Engineer.id)
    return [employee_of(e) for e in session.execute(query.options(*options)).scalars()]


def managers_with_reports(session: Any, *options: Any) -> Any:
    query = select(Manager).options(selectinload(Manager.reports), *options).order_by(Manager.id)
    return [
        (*employee_of(m), [employee_of(r) for r in m.reports])
        for m in session.execute(query).scalars()
    ]


def engineers_with_manager(session: Any, *options: Any) -> Any:
    query = select(Engineer).options(joinedload(Engineer.manager), *options).order_by(Engineer.id)
    return [(*employee_of(e), employee_of(e.manager)) for e in session.execute(query).scalars()]


def got_employee(session: Any, cls: Any, key: int, *options: Any) -> Any:
    return employee_of(session.get(cls, key, options=list(options)))


def employees_with_vehicles(session: Any, *options: Any) -> Any:
    query = select(Employee).options(selectinload(Employee.vehicles), *options)
    return [
        (e.id, e.name, [vehicle_of(v) for v in e.vehicles])
        for e in session.execute(query.order_by(Employee.id)).scalars()
    ]


def vehicles(session: Any, cls: Any, *options: Any) -> Any:
    query = select(cls).order_by(cls.id).options(*options)
    return [vehicle_of(v) for v in session.execute(query).scalars()]


def cars_with_doors(session: Any, doors: int, *options: Any) -> Any:
    query = select(Car.id, Car.doors).where(Car.doors >= doors).order_by(Car.id)
    return [tuple(row) for row in session.execute(query.options(*options))]


def vehicle_counts(session: Any, *options: Any) -> Any:
    table = Vehicle.__table__
    query = select(table.c.kind, func.count()).group_by(table.c.kind).order_by(table.c.kind)
    return [tuple(row) for row in session.execute(query.options(*options))]


def got_vehicle(session: Any, cls: Any, key: int, *options: Any) -> Any:
    return vehicle_of(session.get(cls, key, options=list(options)))


def accounts(session: Any, *options: Any) -> Any:
    query = select(Account).order_by(Account.id).options(*options)
    return [
        (a.id, a.owner, a.balance, [(e.id, e.amount) for e in a.entries])
        for a in session.execute(query).scalars()
    ]


def got_account(session: Any, key: int, *options: Any) -> Any:
    found = session.get(Account, key, options=list(options))
    return None if found is None else (found.owner, found.balance, [e.id for e in found.entries])


def entry_sums(session: Any, *options: Any) -> Any:
    query = select(Account.owner, func.coalesce(func.sum(Entry.amount), 0))
    query = query.outerjoin(Entry, Entry.account_id == Account.id).group_by(Account.owner)
    return [tuple(row) for row in session.execute(query.order_by(Account.owner).options(*options))]


def rich_owners(session: Any, floor: int, *options: Any) -> Any:
    table = Account.__table__
    query = select(table.c.owner).where(table.c.balance >= floor).order_by(table.c.id)
    return list(session.execute(query.options(*options)).scalars())


Read = Callable[..., Any]


@dataclass(frozen=True)
class ReadKind:
    name: str
    make: Callable[[random.Random], Read]
    schema: bool = False  # reads a tenant's schema: its session needs a schema_translate_map


READS: list[ReadKind] = [
    ReadKind(
        "got_node", lambda rng: (lambda k: lambda s, *o: got_node(s, k, *o))(rng.randint(1, 6))
    ),
    ReadKind("roots", lambda rng: roots),
    ReadKind("users_plain", lambda rng: users_plain),
    ReadKind(
        "users_selectin",
        lambda rng: lambda s, *o: users_with_addresses(s, selectinload, *o),
    ),
    ReadKind(
        "users_joined",
        lambda rng: lambda s, *o: users_with_addresses(s, joinedload, *o),
    ),
    ReadKind(
        "emails_of", lambda rng: (lambda k: lambda s, *o: emails_of(s, k, *o))(rng.randint(1, 6))
    ),
    ReadKind("joined", lambda rng: joined),
    ReadKind(
        "got_user", lambda rng: (lambda k: lambda s, *o: got_user(s, k, *o))(rng.randint(1, 6))
    ),
    ReadKind(
        "got_address",
        lambda rng: (lambda k: lambda s, *o: got_address(s, k, *o))(rng.randint(10, 16)),
    ),
]


READS += [
    ReadKind(
        "employees",
        lambda rng: (lambda how: lambda s, *o: employees(s, how, *o))(
            rng.choice(("with_polymorphic", "selectin_polymorphic", "plain"))
        ),
    ),
    ReadKind(
        "engineers_of",
        lambda rng: (lambda lang: lambda s, *o: engineers_of(s, lang, *o))(
            rng.choice(("py", "rust", "go"))
        ),
    ),
    ReadKind("managers_with_reports", lambda rng: managers_with_reports),
    ReadKind("engineers_with_manager", lambda rng: engineers_with_manager),
    ReadKind(
        "got_employee",
        lambda rng: (lambda cls, k: lambda s, *o: got_employee(s, cls, k, *o))(
            rng.choice((Employee, Engineer, Manager)), rng.randint(1, 8)
        ),
    ),
    ReadKind("employees_with_vehicles", lambda rng: employees_with_vehicles),
    ReadKind(
        "vehicles",
        lambda rng: (lambda cls: lambda s, *o: vehicles(s, cls, *o))(
            rng.choice((Vehicle, Car, Truck))
        ),
    ),
    ReadKind(
        "cars_with_doors",
        lambda rng: (lambda d: lambda s, *o: cars_with_doors(s, d, *o))(rng.randint(2, 5)),
    ),
    ReadKind("vehicle_counts", lambda rng: vehicle_counts),
    ReadKind(
        "got_vehicle",
        lambda rng: (lambda cls, k: lambda s, *o: got_vehicle(s, cls, k, *o))(
            rng.choice((Vehicle, Car, Truck)), rng.randint(1, 7)
        ),
    ),
]

# Twice each: a tenant's results must meet the other tenant's cached ones between writes.
READS += 2 * [
    ReadKind("accounts", lambda rng: accounts, schema=True),
    ReadKind(
        "got_account",
        lambda rng: (lambda k: lambda s, *o: got_account(s, k, *o))(rng.randint(1, 6)),
        schema=True,
    ),
    ReadKind("entry_sums", lambda rng: entry_sums, schema=True),
    ReadKind(
        "rich_owners",
        lambda rng: (lambda f: lambda s, *o: rich_owners(s, f, *o))(rng.randrange(90)),
        schema=True,
    ),
]


def pick_read(rng: random.Random, *, schema: bool = True) -> tuple[str, Read, bool]:
    kinds = READS if schema else [kind for kind in READS if not kind.schema]
    kind = rng.choice(kinds)
    return kind.name, kind.make(rng), kind.schema


# -- writes ------------------------------------------------------------------------------


def write_users(session: Any, rng: random.Random, ids: Iterator[int]) -> None:
    """Users, addresses and the tree."""
    kind = rng.randrange(11)
    user_id = rng.randint(1, 6)
    if kind == 0:
        user = session.get(User, user_id)
        if user is not None:
            user.name = f"u{rng.randrange(100)}"
    elif kind == 1:
        if session.get(User, user_id) is not None:
            session.add(Address(id=next(ids), user_id=user_id, email=f"e{rng.randrange(100)}"))
    elif kind == 2:
        found = session.get(Address, rng.randint(10, 16))
        if found is not None:
            session.delete(found)
    elif kind == 3:
        session.execute(update(User).where(User.id == user_id).values(name=f"b{rng.randrange(9)}"))
    elif kind == 4:
        session.execute(delete(Address).where(Address.user_id == user_id))
    elif kind == 5:
        if session.get(User, user_id) is None:
            session.execute(insert(User).values(id=user_id, name="new", tier="FREE", prefs={}))
    elif kind == 6:
        session.execute(
            text("UPDATE addresses SET email = :e WHERE id = :i"),
            {"e": f"t{rng.randrange(9)}", "i": rng.randint(10, 16)},
        )
    elif kind == 7:
        session.execute(delete(User).where(User.id == user_id))  # addresses cascade
    elif kind == 8:
        node = session.get(Node, rng.randint(1, 6))
        if node is not None:
            node.label = f"n{rng.randrange(100)}"
    elif kind == 9:
        parent = session.get(Node, rng.randint(1, 6))
        if parent is not None:
            session.add(Node(id=next(ids), parent_id=parent.id, label="new"))
    else:
        session.execute(delete(Node).where(Node.id == rng.randint(2, 6)))  # its subtree too


def write_inherited(session: Any, rng: random.Random, ids: Iterator[int]) -> None:
    """Employees (joined-table inheritance) and vehicles (single-table)."""
    kind = rng.randrange(18)
    key = rng.randint(1, 8)
    if kind == 0:
        found: Any = session.get(Employee, key)
        if found is not None:
            found.name = f"e{rng.randrange(100)}"
    elif kind == 1:
        found = session.get(Engineer, key)
        if found is not None:
            found.language = rng.choice(("py", "rust", "go"))
            found.manager_id = rng.choice((None, 1, 5, key))
    elif kind == 2:
        found = session.get(Manager, key)
        if found is not None:
            found.budget = rng.randrange(200)
    elif kind == 3:
        manager = rng.choice((None, 1, 5))
        session.add(Engineer(id=next(ids), name="new", language="go", manager_id=manager))
    elif kind == 4:
        session.add(Manager(id=next(ids), name="boss", budget=rng.randrange(200)))
    elif kind == 5:
        found = session.get(Employee, key)
        if found is not None:
            session.delete(found)  # its reports' manager_id and vehicles: by the database
    elif kind == 6:  # ORM-enabled UPDATE by criteria, of a subclass's own table
        old, new = rng.sample(("py", "rust", "go"), 2)
        session.execute(update(Engineer).where(Engineer.language == old).values(language=new))
    elif kind == 7:  # ORM bulk UPDATE by primary key: both tables of a joined subclass
        keys = session.scalars(select(Engineer.id).order_by(Engineer.id)).all()
        rows = [
            {"id": k, "name": f"b{rng.randrange(9)}", "language": rng.choice(("py", "go"))}
            for k in keys
            if rng.random() < 0.5
        ]
        if rows:
            session.execute(update(Engineer), rows)
    elif kind == 8:  # ORM bulk INSERT: both tables of a joined subclass, and one table
        session.execute(
            insert(Engineer),
            [{"id": next(ids), "name": "bulk", "language": "py", "manager_id": None}],
        )
        session.execute(insert(Car), [{"id": next(ids), "wheels": 4, "doors": 2, "owner_id": None}])
    elif kind == 9:
        session.execute(delete(Employee).where(Employee.id == key))  # the rest cascades
    elif kind == 10:
        found = session.get(Vehicle, rng.randint(1, 7))
        if isinstance(found, Car):
            found.doors = rng.randint(2, 5)
        elif isinstance(found, Truck):
            found.payload = rng.randrange(50)
        elif found is not None:
            found.owner_id = rng.choice((None, 2, 4))
    elif kind == 11:  # ORM-enabled UPDATE of a single-table subclass: WHERE kind IN (...)
        if rng.random() < 0.5:
            session.execute(update(Car).values(doors=rng.randint(2, 5)))
        else:
            session.execute(update(Truck).where(Truck.payload > 5).values(wheels=rng.randint(4, 9)))
    elif kind == 12:
        if rng.random() < 0.5:
            session.execute(delete(Truck).where(Truck.wheels > rng.randint(4, 20)))
        else:
            session.execute(delete(Vehicle).where(Vehicle.id == rng.randint(1, 7)))
    elif kind == 13:
        owner = rng.choice((None, 2, 4))
        if rng.random() < 0.5:
            session.add(Car(id=next(ids), wheels=4, doors=rng.randint(2, 5), owner_id=owner))
        else:
            session.add(Truck(id=next(ids), wheels=6, payload=rng.randrange(50), owner_id=owner))
    elif kind == 14:
        found = session.get(Employee, key)
        if found is not None:
            found.vehicles.append(Car(id=next(ids), wheels=4, doors=4))
    else:  # one table of a joined subclass, as a Core Table (on the session, its connection)
        engineers = Engineer.__table__
        language = rng.choice(("py", "rust", "go"))
        change = update(engineers).where(engineers.c.id == key).values(language=language)
        if kind == 15:
            session.connection().execute(change)
        else:
            session.execute(change)


def write_accounts(session: Any, rng: random.Random, ids: Iterator[int]) -> None:
    """A tenant's accounts and entries (the session's schema_translate_map names it)."""
    kind = rng.randrange(10)
    key = rng.randint(1, 6)
    accounts, entries = Account.__table__, Entry.__table__
    if kind == 0:
        found: Any = session.get(Account, key)
        if found is not None:
            found.balance = rng.randrange(90)
    elif kind == 1:
        session.add(Account(id=next(ids), owner=f"o{rng.randrange(9)}", balance=5))
    elif kind == 2:
        found = session.get(Account, key)
        if found is not None:
            found.entries.append(Entry(id=next(ids), amount=rng.randrange(9)))
    elif kind == 3:
        found = session.get(Account, key)
        if found is not None:
            session.delete(found)  # its entries: by the database
    elif kind == 4:
        floor = rng.randrange(60)
        session.execute(
            update(Account).where(Account.balance < floor).values(balance=Account.balance + 1)
        )
    elif kind == 5:
        session.execute(
            update(accounts).where(accounts.c.id == key).values(owner=f"c{rng.randrange(9)}")
        )
    elif kind == 6:
        session.execute(insert(entries).values(id=next(ids), account_id=key, amount=7))
    elif kind == 7:
        session.execute(delete(entries).where(entries.c.amount > rng.randrange(9)))
    elif kind == 8:  # on the transaction's connection, not through session.execute()
        session.connection().execute(
            update(accounts).where(accounts.c.id == key).values(balance=rng.randrange(90))
        )
    else:
        session.execute(delete(Account).where(Account.id == key))  # entries cascade


def write_core(session: Any, rng: random.Random, ids: Iterator[int]) -> None:
    """Core statements on Tables, on the session or its connection; ORM bulk and legacy
    bulk writes; an INSERT ... SELECT holding a CTE."""
    kind = rng.randrange(10)
    key = rng.randint(1, 6)
    users, addresses, nodes = User.__table__, Address.__table__, Node.__table__
    if kind == 0:
        session.execute(insert(addresses).values(id=next(ids), user_id=key, email="core"))
    elif kind == 1:
        session.execute(update(nodes).where(nodes.c.id == key).values(label=f"c{key}"))
    elif kind == 2:
        session.execute(delete(addresses).where(addresses.c.id == rng.randint(10, 16)))
    elif kind == 3:
        session.connection().execute(
            update(users).where(users.c.id == key).values(name=f"k{rng.randrange(9)}")
        )
    elif kind == 4:
        vehicles = Vehicle.__table__
        session.connection().execute(delete(vehicles).where(vehicles.c.wheels == 2))
    elif kind == 5:  # an INSERT ... SELECT reading a CTE
        picked = select(users.c.id).where(users.c.id == key).cte("picked")
        source = select(literal(next(ids)), picked.c.id, literal("from_cte"))
        session.execute(insert(addresses).from_select(["id", "user_id", "email"], source))
    elif kind == 6:  # the legacy bulk methods: on the connection, no flush
        choice = rng.randrange(3)
        if choice == 0:
            session.bulk_save_objects([Address(id=next(ids), user_id=key, email="saved")])
        elif choice == 1:
            session.bulk_insert_mappings(Node, [{"id": next(ids), "parent_id": 1, "label": "m"}])
        elif session.get(User, key) is not None:
            session.bulk_update_mappings(User, [{"id": key, "name": f"m{rng.randrange(9)}"}])
    elif kind == 7:  # ORM bulk INSERT
        rows = [{"id": next(ids), "user_id": key, "email": f"bulk{n}"} for n in range(2)]
        session.execute(insert(Address), rows)
    elif kind == 8:  # ORM bulk UPDATE by primary key
        keys = session.scalars(select(User.id).order_by(User.id)).all()
        rows = [{"id": k, "name": f"p{rng.randrange(9)}"} for k in keys if rng.random() < 0.5]
        if rows:
            session.execute(update(User), rows)
    else:  # a single-table subclass's column, as a Core Table: no discriminator criteria
        vehicles = Vehicle.__table__
        doors = rng.randint(2, 5)
        session.execute(update(vehicles).where(vehicles.c.doors < doors).values(doors=doors))


def write_cte(session: Any, rng: random.Random, ids: Iterator[int]) -> None:
    """A SELECT that writes: WITH x AS (UPDATE/DELETE/INSERT ... RETURNING) SELECT, with
    cached() or not (it runs every time, never stored)."""
    key = rng.randint(1, 6)
    users, addresses, nodes = User.__table__, Address.__table__, Node.__table__
    if session.get_bind().dialect.name != "postgresql":
        # SQLite has no data-modifying CTE: an UPDATE whose criteria read a CTE instead
        picked = select(users.c.id).where(users.c.id <= key).cte("picked")
        session.execute(
            update(addresses).where(addresses.c.user_id.in_(select(picked.c.id))).values(email="w")
        )
        return
    options = [cached()] if rng.random() < 0.5 else []
    kind = rng.randrange(3)
    if kind == 0:
        moved = (
            update(users)
            .where(users.c.id == key)
            .values(name=f"cte{rng.randrange(9)}")
            .returning(users.c.id)
            .cte("moved")
        )
        session.execute(select(moved.c.id).options(*options)).all()
    elif kind == 1:
        gone = delete(addresses).where(addresses.c.user_id == key).returning(addresses.c.id)
        session.execute(
            select(User.id).where(User.id == key).add_cte(gone.cte("gone")).options(*options)
        ).all()
    else:
        added = (
            insert(nodes)
            .values(id=next(ids), parent_id=rng.randint(1, 6), label="cte")
            .returning(nodes.c.id)
            .cte("added")
        )
        session.execute(select(added.c.id).options(*options)).all()


# (write, whether its session needs a tenant's schema)
WRITES: list[tuple[Callable[[Any, random.Random, Iterator[int]], None], bool]] = [
    *3 * [(write_users, False)],
    *3 * [(write_inherited, False)],
    (write_accounts, True),
    *2 * [(write_core, False)],
    *2 * [(write_cte, False)],
]


# -- sessions ----------------------------------------------------------------------------


def tenant_filter(state: ORMExecuteState) -> None:
    """SQLAlchemy's multi-tenant recipe, registered after attach(): a session whose info
    names a tenant (0 or 1) sees the users whose id has that parity."""
    tenant = state.session.info.get("tenant")
    if tenant is None or not state.is_select or state.is_relationship_load:
        return
    if state.is_column_load:
        return
    state.statement = state.statement.options(
        with_loader_criteria(User, lambda cls: cls.id % 2 == tenant, include_aliases=True)
    )


@dataclass(frozen=True)
class Scope:
    """How a session is opened: the row tenant its info names (the listener above), and
    the schema its "tenant" tables are read from, set by one of SQLAlchemy's two recipes:
    a bind with execution options ("bind"), or the session's connection's options
    ("connection")."""

    tenant: int | None = None
    schema: str | None = None
    recipe: str = "bind"


def pick_scope(rng: random.Random, schema: bool, rows: bool = True) -> Scope:
    tenant = rng.choice((0, 1)) if rows and rng.random() < 0.3 else None
    if not schema and rng.random() < 0.8:
        return Scope(tenant)
    return Scope(tenant, rng.choice(TENANTS), rng.choice(("bind", "connection")))


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


class Fence:
    """Waits until this process's invalidation listener has applied every L1
    invalidation other processes published before now (their commits' token deletes).

    The L1 of `held` (on the QueryCaches' client, so on their listener) holds a marker;
    a delete of it through another client, whose messages that listener does not take for
    its own, is published after all those invalidations (they were published before
    their commits returned), and one listener applies messages in the order Redis sent
    them: once the marker is gone, they are applied."""

    KEY = "marker"

    def __init__(self, client: Any, other_client: Any, namespace: str) -> None:
        name = f"{namespace}-fence"
        self.held = seawall.Cache(client, name, ttl=3600, l1_ttl=600, hot_keys=0)
        self.dropper = seawall.Cache(other_client, name, ttl=3600, l1_size=0, hot_keys=0)
        self.text = self.held._key(self.KEY)

    def wait(self) -> None:
        deadline = time.monotonic() + 10
        while self.held.l1.get(self.text) is MISSING:  # a fill needs the listener first
            assert time.monotonic() < deadline, "the fence's marker never reached the L1"
            self.held.get_or_load(self.KEY, lambda: 1)
            if self.held.l1.get(self.text) is MISSING:
                time.sleep(0.001)
        self.dropper.delete(self.KEY)
        while self.held.l1.get(self.text) is not MISSING:
            assert time.monotonic() < deadline, "the invalidation broadcast never arrived"
            time.sleep(0.0002)


class World:
    """One process's part: an engine, QueryCaches of one namespace (each with its own
    sessionmaker), a session that keeps its objects across others' commits, and (for the
    parent) sessions with no cache, whose answers are the database's."""

    def __init__(
        self, url: str, client: Any, other_client: Any, namespace: str, options: list[Any]
    ) -> None:
        self.engine = make_engine(url)
        self.factories = []
        for cache_options in options:
            factory = sessionmaker(self.engine)
            QueryCache(client, namespace, **cache_options).attach(factory)
            event.listen(factory, "do_orm_execute", tenant_filter)
            self.factories.append(factory)
        self.truth = sessionmaker(self.engine)  # no QueryCache: the database's answer
        event.listen(self.truth, "do_orm_execute", tenant_filter)
        self.fence = Fence(client, other_client, namespace)
        self.holder = self.factories[0]()
        self.clients = (client, other_client)

    def close(self) -> None:
        self.holder.close()
        self.engine.dispose()

    def fence_wait(self) -> None:
        self.fence.wait()

    def session(self, factory: Any, scope: Scope) -> Any:
        info = {} if scope.tenant is None else {"tenant": scope.tenant}
        if scope.schema is None:
            return factory(info=info)
        if scope.recipe == "bind":
            return factory(info=info, bind=in_schema(self.engine, scope.schema))
        session = factory(info=info)
        session.connection(execution_options={"schema_translate_map": {"tenant": scope.schema}})
        return session

    def read(self, index: int | None, op_seed: int) -> tuple[str, Any]:
        """(the read's name, its answer): cached through factory `index`, or uncached
        (None) from the database."""
        rng = random.Random(op_seed)
        name, read, schema = pick_read(rng)
        scope = pick_scope(rng, schema)
        if index is None:
            with self.session(self.truth, scope) as session:
                return name, read(session)
        with self.session(self.factories[index], scope) as session:
            return name, read(session, cached())

    def hold(self, op_seed: int) -> None:
        """A session that keeps what it loaded, sometimes across other commits: what its
        cached reads store must still be the database's rows."""
        rng = random.Random(op_seed)
        holder = self.holder
        choice = rng.random()
        if choice < 0.2:
            holder.rollback()
            holder.info.pop("kept", None)
        elif choice < 0.5:
            users = holder.execute(select(User)).scalars().all()
            kept = holder.info.setdefault("kept", [])
            kept.extend(users)
            kept.extend(address for user in users for address in user.addresses)
        else:
            pick_read(rng, schema=False)[1](holder, cached())

    def write(self, index: int, op_seed: int, ids: range) -> bool:
        """One write through factory `index`; True if its transaction committed."""
        rng = random.Random(op_seed)
        writer, schema = rng.choice(WRITES)
        with self.session(self.factories[index], pick_scope(rng, schema, False)) as session:
            nested = rng.random() < 0.2
            if nested:
                savepoint = session.begin_nested()
            try:
                writer(session, rng, iter(ids))
                session.flush()
            except DBAPIError:  # a key another row still references, ...
                session.rollback()
                return False
            if nested and rng.random() < 0.5:
                savepoint.rollback()
            if rng.random() < 0.8:
                session.commit()
                return True
            session.rollback()
            return False


def serve_peer(redis_url: str, pipe: Connection) -> None:
    """The second process: for each workload ("open" with its database and namespace, to
    "shut") its own engine, QueryCache (with its L1) and sessions; runs the steps the parent
    sends (World's method name and arguments) and sends back ("ok", answer) or ("error",
    traceback), until told "close". One process serves every test of a module: a spawn
    costs about a second."""
    client = redis.Redis.from_url(redis_url)
    other_client = redis.Redis.from_url(redis_url)
    world: World | None = None
    pipe.send(("ok", None))
    while True:
        method, args = pipe.recv()
        try:
            if method == "open":
                url, namespace = args
                world = World(url, client, other_client, namespace, [{}])
                answer = None
            elif method in ("shut", "close"):
                if world is not None:
                    world.close()
                world = answer = None
            else:
                assert world is not None, "no workload open"
                answer = getattr(world, method)(*args)
        except BaseException:
            pipe.send(("error", traceback.format_exc()))
        else:
            pipe.send(("ok", answer))
        if method == "close":
            client.close()
            other_client.close()
            return


class Peer:
    """The parent's handle on serve_peer: World's methods, run in the other process."""

    def __init__(self, context: Any, redis_url: str) -> None:
        self.pipe, theirs = context.Pipe()
        self.process = context.Process(target=serve_peer, args=(redis_url, theirs), daemon=True)
        self.process.start()
        theirs.close()
        self._answer()

    def _answer(self) -> Any:
        if not self.pipe.poll(60):
            raise AssertionError("the peer process did not answer within 60 s")
        status, answer = self.pipe.recv()
        if status != "ok":
            raise AssertionError(f"in the peer process:\n{answer}")
        return answer

    def call(self, method: str, *args: Any) -> Any:
        self.pipe.send((method, args))
        return self._answer()

    def close(self) -> None:
        try:
            self.call("close")
        finally:
            self.process.join(10)
            self.pipe.close()


def run_steps(local: World, peer: Peer | None, seed_value: int, ops: int) -> int:
    """The workload: each step a read, a holder's step or a write, in this process (through
    either QueryCache) or the peer. Returns the number of cached reads compared per process
    ("local", "peer"); raises on
    the first difference. Before a process's step, its L1s have applied the invalidations
    of every commit made elsewhere (Fence), so each comparison is exact."""
    rng = random.Random(seed_value)
    places: list[tuple[str, int]] = [("local", 0), ("local", 1)]
    if peer is not None:
        places.append(("peer", 0))
    behind: set[str] = set()  # processes with commits made elsewhere since their last step
    compared = {"local": 0, "peer": 0}

    def call(where: str, method: str, *args: Any) -> Any:
        if where in behind:
            behind.discard(where)
            call(where, "fence_wait")
        if where == "local":
            return getattr(local, method)(*args)
        assert peer is not None
        return peer.call(method, *args)

    for step in range(ops):
        where, index = rng.choice(places)
        op_seed = rng.randrange(2**32)
        roll = rng.random()
        if roll < 0.5:
            name, got = call(where, "read", index, op_seed)
            _, expected = local.read(None, op_seed)
            assert got == expected, (
                f"seed {seed_value}, step {step} ({where} {index}, {name}): {got} != {expected}"
            )
            compared[where] += 1
        elif roll < 0.65:
            call(where, "hold", op_seed)
        elif call(where, "write", index, op_seed, range(1000 + step * 10, 1010 + step * 10)):
            behind.update(other for other, _ in places if other != where)
    return compared
