"""The reads and writes of the differential test (tests/test_sqla_differential.py), each
drawn from a random.Random: the same seed gives the same step in either process."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from sqladiffmodels import Account, Car, Employee, Engineer, Entry, Manager, Node, Truck, Vehicle
from sqlalchemy import (
    delete,
    func,
    insert,
    literal,
    select,
    text,
    update,
)
from sqlalchemy.orm import (
    joinedload,
    selectin_polymorphic,
    selectinload,
    with_polymorphic,
)
from sqlaworkers import Address, User

from seawall.sqlalchemy import cached

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
