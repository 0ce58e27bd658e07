"""The differential test's processes (tests/test_sqla_differential.py): one process's
"world" (engine, QueryCaches, sessions), the fence that waits for the other process's
invalidations, the loop that serves a peer process's steps, and the workload's loop.

Every step is drawn from a seed of its own (`op_seed`), so a step run by the peer process
is the very step the parent would have run, and the parent can run the same read without
a cache to compare. Models are in sqladiffmodels.py, reads and writes in sqladiffsteps.py."""

from __future__ import annotations

import random
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import redis
from sqladiffmodels import TENANTS, in_schema, make_engine
from sqladiffsteps import WRITES, pick_read
from sqlalchemy import (
    event,
    select,
)
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import (
    ORMExecuteState,
    sessionmaker,
    with_loader_criteria,
)
from sqlaworkers import User

import seawall
from seawall.cache._l1 import MISSING
from seawall.sqlalchemy import QueryCache, cached

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


def run_steps(local: World, peer: Peer | None, seed_value: int, ops: int) -> dict[str, int]:
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
