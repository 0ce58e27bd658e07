"""The chaos test's parts: a writer that knows every key it changed and when, a reader
process that caches keys in Redis and in its L1, a proxy that can silence connections,
and the oracle that says which cached keys the follower owes an invalidation.

The oracle: a key whose last caching finished before a change to it was sent to COMMIT
must end up gone from Redis (at its namespace's current generation: a clear counts, if
the follower said why) and from the reader's L1. A transaction whose COMMIT had no
answer (the database went down) is settled by reading the tables back: every value
written is unique, so a changed row is a changed key.
"""

from __future__ import annotations

import contextlib
import random
import selectors
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from seawall.cache._codec import cache_keys, generation_key, parse_generation

Key = tuple[str, str]  # (namespace, key text)
NAMESPACES = ("users", "events", "tokens")

# -- the schema, per source ------------------------------------------------------------

PG_SCHEMA = (
    "CREATE TABLE users (id INT PRIMARY KEY, email TEXT, name TEXT)",
    "CREATE TABLE events (id INT, region TEXT, note TEXT, PRIMARY KEY (id, region)) "
    "PARTITION BY LIST (region)",
    "CREATE TABLE events_eu PARTITION OF events FOR VALUES IN ('eu')",
    "CREATE TABLE events_us PARTITION OF events FOR VALUES IN ('us')",
    "CREATE TABLE tokens (id UUID PRIMARY KEY, note TEXT)",
    "CREATE TABLE audit (n BIGSERIAL PRIMARY KEY, note TEXT)",
)
MARIADB_SCHEMA = (
    "CREATE TABLE users (id INT PRIMARY KEY, email VARCHAR(64), name VARCHAR(64))",
    "CREATE TABLE events (id INT, region VARCHAR(8), note VARCHAR(64), "
    "PRIMARY KEY (id, region)) PARTITION BY LIST COLUMNS (region) "
    "(PARTITION p_eu VALUES IN ('eu'), PARTITION p_us VALUES IN ('us'))",
    "CREATE TABLE tokens (id UUID PRIMARY KEY, note VARCHAR(64))",
    "CREATE TABLE audit (n BIGINT AUTO_INCREMENT PRIMARY KEY, note VARCHAR(64))",
)
MAPS = ("users=users", "events=events", "tokens=tokens")  # audit is not followed

USER_IDS = range(1, 1501)
EVENT_IDS = range(1, 301)
REGIONS = ("eu", "us")


def token_pool(count: int = 300) -> list[str]:
    """The tokens table's key space: fixed UUIDs (version 4)."""
    rng = random.Random(25)
    return [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(count)]


TOKENS = token_pool()


def key_space() -> list[Key]:
    """Every key a row can have: what the reader picks from (absent keys cache too)."""
    keys = [("users", str(i)) for i in USER_IDS]
    keys += [("events", f"{i}:{r}") for i in EVENT_IDS for r in REGIONS]
    return keys + [("tokens", t) for t in TOKENS]


# -- the writer ------------------------------------------------------------------------


class Ledger:
    """What the writer committed: per key, when its last change was sent to COMMIT."""

    def __init__(self) -> None:
        self.changed: dict[Key, float] = {}
        self.changes = 0
        self.transactions = 0
        self.unsure = 0  # COMMITs with no answer, settled by reading back

    def record(self, keys: Iterable[Key], sent: float) -> None:
        for key in keys:
            self.changes += 1
            self.changed[key] = max(self.changed.get(key, 0.0), sent)


class Writer:
    """Commits a seeded random mix of transactions; `model` mirrors the mapped tables.

    `connect()` returns a new DB-API connection (autocommit off); the database may be
    down: the writer waits for it."""

    def __init__(self, kind: str, connect: Callable[[], Any], ledger: Ledger) -> None:
        self.kind = kind
        self.connect = connect
        self.ledger = ledger
        self.conn: Any = None
        self.number = 0
        self.model: dict[str, dict[str, str]] = {ns: {} for ns in NAMESPACES}

    # the model's rows: users "id" -> name, events "id:region" -> note, tokens uuid -> note

    def populate(self) -> None:
        self.number += 1
        mark = f"t{self.number}"
        users = [(i, f"u{i}@x", mark) for i in range(1, 401)]
        events = [(i, r, mark) for i in range(1, 101) for r in REGIONS]
        tokens = [(t, mark) for t in TOKENS[:100]]
        with self._cursor() as cursor:
            cursor.executemany("INSERT INTO users VALUES (%s, %s, %s)", users)
            cursor.executemany("INSERT INTO events VALUES (%s, %s, %s)", events)
            cursor.executemany("INSERT INTO tokens VALUES (%s, %s)", tokens)
        self.conn.commit()
        self.model = self.read_back()

    @contextlib.contextmanager
    def _cursor(self) -> Any:
        if self.conn is None:
            self.conn = self.connect()
        cursor = self.conn.cursor()
        try:
            yield cursor
        finally:
            with contextlib.suppress(Exception):
                cursor.close()

    def read_back(self) -> dict[str, dict[str, str]]:
        conn = self.connect()
        try:
            cursor = conn.cursor()
            cursor.execute("SELECT id, name FROM users")
            users = {str(i): n for i, n in cursor.fetchall()}
            cursor.execute("SELECT id, region, note FROM events")
            events = {f"{i}:{r}": n for i, r, n in cursor.fetchall()}
            cursor.execute("SELECT id, note FROM tokens")
            tokens = {str(t): n for t, n in cursor.fetchall()}
            conn.rollback()
            return {"users": users, "events": events, "tokens": tokens}
        finally:
            conn.close()

    def step(self, rng: random.Random) -> list[Key]:
        """One transaction of a random mix; the keys it changed (settled if unsure)."""
        return self._run(lambda cursor, mark: self._mix(rng, cursor, mark))

    def truncate(self, rng: random.Random) -> list[Key]:
        namespace = rng.choice(NAMESPACES)

        def body(cursor: Any, mark: str) -> list[Key]:
            cursor.execute(f"TRUNCATE TABLE {namespace}")
            keys = [(namespace, k) for k in self.model[namespace]]
            self.model[namespace] = {}
            return keys

        return self._run(body)

    def rename_swap(self, rng: random.Random) -> list[Key]:
        """The rename-swap migration: a copy with every row changed takes the name."""
        namespace = rng.choice(("users", "tokens"))
        mark = f"t{self.number + 1}"
        columns = "id, email, %s" if namespace == "users" else "id, %s"
        with self._cursor() as cursor:
            cursor.execute(f"DROP TABLE IF EXISTS {namespace}_new")
            cursor.execute(f"DROP TABLE IF EXISTS {namespace}_old")
            like = "(LIKE {} INCLUDING ALL)" if self.kind == "postgresql" else "LIKE {}"
            cursor.execute(f"CREATE TABLE {namespace}_new {like.format(namespace)}")
            cursor.execute(
                f"INSERT INTO {namespace}_new SELECT {columns} FROM {namespace}", (mark,)
            )
        self.conn.commit()

        def body(cursor: Any, _mark: str) -> list[Key]:
            if self.kind == "postgresql":
                cursor.execute(f"ALTER TABLE {namespace} RENAME TO {namespace}_old")
                cursor.execute(f"ALTER TABLE {namespace}_new RENAME TO {namespace}")
            else:
                cursor.execute(
                    f"RENAME TABLE {namespace} TO {namespace}_old, {namespace}_new TO {namespace}"
                )
            rows = self.model[namespace]
            self.model[namespace] = dict.fromkeys(rows, mark)
            return [(namespace, k) for k in rows]

        keys = self._run(body)
        with self._cursor() as cursor:
            cursor.execute(f"DROP TABLE IF EXISTS {namespace}_old")
        self.conn.commit()
        return keys

    def _run(self, body: Callable[[Any, str], list[Key]]) -> list[Key]:
        self.number += 1
        mark = f"t{self.number}"
        before = {ns: dict(rows) for ns, rows in self.model.items()}
        try:
            with self._cursor() as cursor:
                keys = body(cursor, mark)
            sent = time.monotonic()
        except Exception:
            self._reset()
            self.model = before
            raise
        try:
            self.conn.commit()
        except Exception:
            # No answer to COMMIT: it may or may not have happened. Read back.
            self._reset()
            self.ledger.unsure += 1
            self.model = self._wait_read_back()
            keys = [
                (ns, k)
                for ns in NAMESPACES
                for k in set(before[ns]) | set(self.model[ns])
                if before[ns].get(k) != self.model[ns].get(k)
            ]
        self.ledger.record(keys, sent)
        self.ledger.transactions += 1
        return keys

    def _reset(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def _wait_read_back(self) -> dict[str, dict[str, str]]:
        deadline = time.monotonic() + 30
        while True:
            try:
                return self.read_back()
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    # -- the mix ---------------------------------------------------------------------------

    def _mix(self, rng: random.Random, cursor: Any, mark: str) -> list[Key]:
        keys: list[Key] = []
        roll = rng.random()
        if roll < 0.05:  # a large transaction: hundreds of rows in one statement
            low = rng.choice(USER_IDS)
            cursor.execute(
                "UPDATE users SET name = %s WHERE id BETWEEN %s AND %s", (mark, low, low + 600)
            )
            for k in self.model["users"]:
                if low <= int(k) <= low + 600:
                    self.model["users"][k] = mark
                    keys.append(("users", k))
        elif roll < 0.10:  # unmapped tables only
            cursor.execute("INSERT INTO audit (note) VALUES (%s)", (mark,))
        else:
            for _ in range(rng.choice((1, 1, 2, 3))):  # several tables in one transaction
                keys += self._change(rng, cursor, mark, rng.choice(NAMESPACES))
            if rng.random() < 0.5:
                cursor.execute("INSERT INTO audit (note) VALUES (%s)", (mark,))
        return keys

    def _change(self, rng: random.Random, cursor: Any, mark: str, ns: str) -> list[Key]:
        rows = self.model[ns]
        space = _space(ns)
        free = [k for k in rng.sample(space, 8) if k not in rows]
        roll = rng.random()
        if not rows or roll < 0.3:
            if not free:
                return []
            key = free[0]
            cursor.execute(*_insert(ns, key, mark))
            rows[key] = mark
            return [(ns, key)]
        key = rng.choice(sorted(rows))
        if roll < 0.6:
            cursor.execute(*_update(ns, key, mark))
            rows[key] = mark
            return [(ns, key)]
        if roll < 0.8 and free:  # the key itself changes: the old and the new key
            new = free[0]
            cursor.execute(*_rekey(ns, key, new, mark))
            del rows[key]
            rows[new] = mark
            return [(ns, key), (ns, new)]
        cursor.execute(*_delete(ns, key))
        del rows[key]
        return [(ns, key)]


def _space(ns: str) -> list[str]:
    if ns == "users":
        return [str(i) for i in USER_IDS]
    if ns == "events":
        return [f"{i}:{r}" for i in EVENT_IDS for r in REGIONS]
    return TOKENS


def _where(ns: str, key: str) -> tuple[str, tuple[Any, ...]]:
    if ns == "events":
        number, region = key.split(":")
        return "id = %s AND region = %s", (int(number), region)
    return "id = %s", ((int(key) if ns == "users" else key),)


def _insert(ns: str, key: str, mark: str) -> tuple[str, tuple[Any, ...]]:
    if ns == "users":
        return "INSERT INTO users VALUES (%s, %s, %s)", (int(key), f"u{key}@x", mark)
    if ns == "events":
        number, region = key.split(":")
        return "INSERT INTO events VALUES (%s, %s, %s)", (int(number), region, mark)
    return "INSERT INTO tokens VALUES (%s, %s)", (key, mark)


def _update(ns: str, key: str, mark: str) -> tuple[str, tuple[Any, ...]]:
    column = "name" if ns == "users" else "note"
    where, args = _where(ns, key)
    return f"UPDATE {ns} SET {column} = %s WHERE {where}", (mark, *args)


def _rekey(ns: str, key: str, new: str, mark: str) -> tuple[str, tuple[Any, ...]]:
    column = "name" if ns == "users" else "note"
    where, args = _where(ns, key)
    if ns == "events":  # a region change moves the row to another partition
        number, region = new.split(":")
        sets, values = "id = %s, region = %s", (int(number), region)
    else:
        sets, values = "id = %s", ((int(new) if ns == "users" else new),)
    return f"UPDATE {ns} SET {sets}, {column} = %s WHERE {where}", (*values, mark, *args)


def _delete(ns: str, key: str) -> tuple[str, tuple[Any, ...]]:
    where, args = _where(ns, key)
    return f"DELETE FROM {ns} WHERE {where}", args


# -- the reader process ----------------------------------------------------------------


def reader(redis_url: str, commands: Any, replies: Any) -> None:
    """Another process: caches the keys it is sent (get_or_load: Redis and its L1) and
    keeps when each caching finished; answers which keys its L1 still holds."""
    import redis

    import seawall
    from seawall.cache._l1 import MISSING

    # No socket timeout: a call either finished (its effect is in Redis) or failed with
    # the connection (a killed server): either way it is over when the call returns.
    client = redis.Redis.from_url(redis_url)
    # A short lease: a load cut by a killed Redis leaves its lease behind (the AOF keeps
    # it), and the next caching of that key waits it out.
    caches = {
        ns: seawall.Cache(client, ns, ttl=600.0, l1_ttl=600.0, l1_size=100_000, lease=2.0)
        for ns in NAMESPACES
    }
    for cache in caches.values():
        listener = cache._listener()
        assert listener is not None and listener.wait_listening(10)
    cached: dict[Key, float] = {}
    replies.put("ready")
    while True:
        command, arg = commands.get()
        if command == "cache":
            for ns, key in arg:
                with contextlib.suppress(Exception):
                    caches[ns].get_or_load(key, lambda: "cached")
                cached[(ns, key)] = time.monotonic()
        elif command == "report":
            replies.put(dict(cached))
        elif command == "l1":
            held = [(ns, k) for ns, k in arg if caches[ns].l1.get(k) is not MISSING]
            replies.put(held)
        else:
            replies.put("stopped")
            client.close()
            return


def in_redis(client: Any, keys: list[Key]) -> list[Key]:
    """The keys Redis holds an entry for, at their namespace's current generation."""
    pipe = client.pipeline(transaction=False)
    for ns in NAMESPACES:
        pipe.get(generation_key(ns))
    generations = dict(zip(NAMESPACES, map(parse_generation, pipe.execute()), strict=True))
    pipe = client.pipeline(transaction=False)
    for ns, key in keys:
        pipe.exists(cache_keys(ns, key, generations[ns]).value)
    return [k for k, found in zip(keys, pipe.execute(), strict=True) if found]


def generations(client: Any) -> dict[str, int]:
    return {ns: parse_generation(client.get(generation_key(ns))) for ns in NAMESPACES}


def owed(cached: dict[Key, float], changed: dict[Key, float]) -> list[Key]:
    """Keys changed (sent to COMMIT) after their last caching finished."""
    return [k for k, at in cached.items() if changed.get(k, 0.0) > at]


# -- a proxy that can silence its connections ------------------------------------------


class SilencingProxy:
    """A TCP proxy to `port`; silence() stops every open connection in both directions
    (bytes wait in the kernel, nothing is closed: a network black hole), heal() closes
    them. New connections pass normally."""

    def __init__(self, port: int) -> None:
        self.upstream = port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ, None)
        self._silenced: list[tuple[socket.socket, socket.socket]] = []
        self._pairs: dict[socket.socket, socket.socket] = {}
        self._lock = threading.Lock()
        self._silence = False
        self._closing = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def silence(self) -> None:
        with self._lock:
            self._silence = True

    def heal(self) -> None:
        with self._lock:
            self._silence = False
            silenced, self._silenced = self._silenced, []
        for a, b in silenced:
            for sock in (a, b):
                with contextlib.suppress(OSError):
                    sock.close()

    def close(self) -> None:
        self._closing = True
        self._thread.join(5)
        self.heal()
        for sock in list(self._pairs):
            with contextlib.suppress(OSError):
                sock.close()
        self._listener.close()

    def _run(self) -> None:
        while not self._closing:
            with self._lock:
                if self._silence:
                    for sock in list(self._pairs):
                        if sock not in self._pairs:
                            continue  # the other end of a pair already silenced
                        other = self._pairs.pop(sock)
                        self._pairs.pop(other, None)
                        for s in (sock, other):
                            with contextlib.suppress(KeyError, ValueError):
                                self._selector.unregister(s)
                        self._silenced.append((sock, other))
            for selected, _ in self._selector.select(0.05):
                sock = selected.fileobj
                assert isinstance(sock, socket.socket)
                if sock is self._listener:
                    self._accept()
                    continue
                other = self._pairs.get(sock)
                if other is None:
                    continue
                try:
                    data = sock.recv(65536)
                    if data:
                        other.sendall(data)
                        continue
                except OSError:
                    pass
                self._drop(sock, other)

    def _accept(self) -> None:
        client, _ = self._listener.accept()
        try:
            upstream = socket.create_connection(("127.0.0.1", self.upstream), timeout=2)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        self._pairs[client], self._pairs[upstream] = upstream, client
        self._selector.register(client, selectors.EVENT_READ, None)
        self._selector.register(upstream, selectors.EVENT_READ, None)

    def _drop(self, a: socket.socket, b: socket.socket) -> None:
        for sock in (a, b):
            self._pairs.pop(sock, None)
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(sock)
            with contextlib.suppress(OSError):
                sock.close()
