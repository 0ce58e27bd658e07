"""Key naming. Every key of one primitive shares one hash tag, so its scripts run on Cluster."""

from __future__ import annotations

from dataclasses import dataclass

PREFIX = "seawall"


def hash_tag(key: str) -> str | None:
    """The part of `key` Redis Cluster hashes, or None when the whole key is hashed.

    Redis's rule: the text between the first "{" and the first "}" after it, if non-empty.
    """
    start = key.find("{")
    if start < 0:
        return None
    end = key.find("}", start + 1)
    if end < 0 or end == start + 1:
        return None
    return key[start + 1 : end]


def tagged(kind: str, name: str) -> str:
    """The base key for primitive `kind` named `name`; suffixes keep its hash slot.

    Distinct names always give distinct keys: the character after "seawall:<kind>:" says
    which of three forms follows.
    - "{name}": the usual form; the name is the hash tag.
    - "#name": the name carries its own hash tag, which is kept so users can co-locate a
      lock with the keys it protects.
    - "~{~}name": the name starts with "}", which would make an empty tag (whole-key
      hashing, so suffixed keys would scatter across slots); these share the tag "~".
    """
    if hash_tag(name) is not None:
        return f"{PREFIX}:{kind}:#{name}"
    if name.startswith("}"):
        return f"{PREFIX}:{kind}:~{{~}}{name}"
    return f"{PREFIX}:{kind}:{{{name}}}"


# Wake-up channels are "<WAKE_PREFIX><waiter id>", one per process (per event loop) and
# client; the release script builds the name from the id it pops from the queue.
WAKE_PREFIX = f"{PREFIX}:wake:"


@dataclass(frozen=True, slots=True)
class LockKeys:
    key: str  # holds the owner's token while held
    fence: str  # counter, INCRed on every acquisition; expires a day after it was made
    waiters: str  # zset of waiting processes' ids, oldest first; gone when nobody waits
    throttle: str  # short-lived marker: a waiter was woken moments ago
    queued: str  # marker set with every queueing: absent, a release skips the queue
    grants: str  # hash: waiting process's id -> its waiting head's token and ttl
    released: str  # prefix of release records: a replayed release finds its token's

    def record(self, token: str) -> str:
        """The release record of `token` (see lock_release.lua)."""
        return f"{self.released}:{token}"


def lock_keys(name: str) -> LockKeys:
    return lock_keys_of(tagged("lock", name))


def lock_keys_of(key: str) -> LockKeys:
    """The keys of the lock whose main key is `key` (a wake-up message carries it)."""
    return LockKeys(
        key=key,
        fence=f"{key}:fence",
        waiters=f"{key}:waiters",
        throttle=f"{key}:woken",
        queued=f"{key}:queued",
        grants=f"{key}:grants",
        released=f"{key}:released",
    )


@dataclass(frozen=True, slots=True)
class RWLockKeys:
    """Keys of one reader-writer lock. The waker GETs a wake-up key and uses
    "<wake-up key>:waiters" as its queue: `writer` is a string (or absent) and `read_turn`
    is never stored, so neither can be of the wrong type; the readers' zset is elsewhere."""

    writer: str  # the writer's token while write-held; the writers' wake-up key
    writers_waiting: str  # zset: waiting writer process id -> intent expiry (server ms)
    read_turn: str  # never stored: the readers' wake-up key
    readers_waiting: str  # zset: waiting reader process id -> expiry (server ms)
    readers: str  # zset: reader token -> lease expiry (server ms)
    admitted: str  # set: reader processes let in ahead of waiting writers
    fence: str  # counter, INCRed on every write hold; expires a day after it was made
    released: str  # prefix of release records (either side): a replay finds its token's

    def record(self, token: str) -> str:
        """The release record of `token` (see rwlock_*_release.lua)."""
        return f"{self.released}:{token}"


def rwlock_keys(name: str) -> RWLockKeys:
    base = tagged("rwlock", name)
    return RWLockKeys(
        writer=f"{base}:write",
        writers_waiting=f"{base}:write:waiters",
        read_turn=f"{base}:read",
        readers_waiting=f"{base}:read:waiters",
        readers=f"{base}:readers",
        admitted=f"{base}:admitted",
        fence=f"{base}:fence",
        released=f"{base}:released",
    )


def kind_of(key: str) -> str:
    """The primitive kind of a key built by `tagged` ("lock", "semaphore", ...)."""
    return key.split(":", 2)[1] if key.startswith(f"{PREFIX}:") else ""


@dataclass(frozen=True, slots=True)
class SemaphoreKeys:
    key: str  # zset: holders' tokens scored by when their leases end (server ms)
    fence: str  # counter, INCRed on every acquisition; expires a day after it was made
    waiters: str  # zset: waiting processes' ids scored by arrival (server ms), oldest first
    seen: str  # zset: the same ids scored by when they count as gone unless they try again
    released: str  # prefix of release records: a replayed release finds its token's

    def record(self, token: str) -> str:
        """The release record of `token` (see semaphore_release.lua)."""
        return f"{self.released}:{token}"

    @property
    def queue(self) -> tuple[str, str, str]:
        """The keys the scripts that take a process off the queue work on."""
        return (self.key, self.waiters, self.seen)


def semaphore_keys(name: str) -> SemaphoreKeys:
    return semaphore_keys_of(tagged("semaphore", name))


def semaphore_keys_of(key: str) -> SemaphoreKeys:
    """The keys of the semaphore whose main key is `key` (a wake-up message carries it)."""
    return SemaphoreKeys(
        key=key,
        fence=f"{key}:fence",
        waiters=f"{key}:waiters",
        seen=f"{key}:seen",
        released=f"{key}:released",
    )


@dataclass(frozen=True, slots=True)
class StockKeys:
    avail: str  # string int: units available now
    onsale: str  # string int: units put on sale in total by put()
    taken: str  # string int: units taken by orders and not cancelled
    orders: str  # hash: order id -> qty taken, or "c<qty>" once cancelled
    log: str  # stream of order events (op, order, qty), one per successful take or cancel
    dead: str  # hash: order id -> JSON of a log entry the OrderSink could not save (set aside)


def stock_keys(name: str) -> StockKeys:
    base = tagged("stock", name)
    return StockKeys(
        avail=f"{base}:avail",
        onsale=f"{base}:onsale",
        taken=f"{base}:taken",
        orders=f"{base}:orders",
        log=f"{base}:log",
        dead=f"{base}:dead",
    )
