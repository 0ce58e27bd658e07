"""Every error seawall raises. Each names the lock or key it concerns."""

from __future__ import annotations

import redis.exceptions


class SeawallError(Exception):
    """Base class of all seawall errors."""


class ServerNotFoundError(SeawallError):
    """No redis-server or valkey-server binary could be found to launch."""


class LockError(SeawallError, redis.exceptions.LockError):
    """A lock operation failed; `lock_name` names the lock.

    Also redis-py's `redis.exceptions.LockError` (so a ValueError and a RedisError, as
    redis-py's is): code moving from `r.lock()` keeps catching what it caught.
    """

    def __init__(self, message: str, *, lock_name: str | None = None) -> None:
        super().__init__(message, lock_name)
        self.lock_name = lock_name

    def __repr__(self) -> str:
        # redis-py's errors show only their class; a seawall error keeps its message.
        return Exception.__repr__(self)


class LockNotOwnedError(LockError, redis.exceptions.LockNotOwnedError, RuntimeError):
    """The caller does not hold the lock: never acquired, released, held by another thread
    or task, or its lease was lost.

    A RuntimeError too, as threading raises for a release by a thread that does not own
    the lock, so code written for threading's locks catches it unchanged; and redis-py's
    `redis.exceptions.LockNotOwnedError`, for code written for `r.lock()`.

    When the lease was lost another process may have held the lock meanwhile; writes made
    under it should be guarded by the lock's fence (see `seawall.fenced_write`).
    """


class LockTimeout(LockError):
    """A blocking acquire did not get the lock within its timeout."""


class LockQueueLostError(LockError):
    """A blocking acquire of a CP lock (seawall.etcd.Lock, seawall.zookeeper.Lock) lost
    its place in the lock's queue while it waited: someone else deleted its queued key or
    node, or revoked its lease. The lock was not acquired.

    Usually an operator cleared the lock by hand (`etcdctl del --prefix`, `etcdctl lease
    revoke`, ZooKeeper's `deleteall`). Granting it anyway, as if the place were still
    there, would let this caller hold the lock beside whoever queued after the clearing;
    acquire again to queue anew.
    """


class LockNotReplicatedError(LockError):
    """A lock was taken, but fewer replicas than `replicas=` acknowledged it in time.

    The lock was released again before this was raised: a failover could have promoted a
    replica that never saw it. `required` and `acked` give the counts.
    """

    def __init__(
        self, message: str, *, lock_name: str | None = None, required: int = 0, acked: int = 0
    ) -> None:
        super().__init__(message, lock_name=lock_name)
        self.required = required
        self.acked = acked


class CacheError(SeawallError):
    """A cache operation failed; `key` names the cache key concerned."""

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


class CacheSerializationError(CacheError, TypeError):
    """A value could not be encoded for the cache; nothing was written."""


class CacheWaitTimeout(CacheError):
    """A caller waited longer than the cache's wait_timeout for another process's load."""


class CacheUnavailable(CacheError):
    """Redis is unreachable, no bounded-stale copy is held here, and the loader's rate
    limit (`loader_limit`) is used up: the database is being protected."""


class BloomFilterError(SeawallError):
    """A Bloom filter in Redis cannot be used as asked; `filter_name` names it."""

    def __init__(self, message: str, *, filter_name: str | None = None) -> None:
        super().__init__(message)
        self.filter_name = filter_name


class StockError(SeawallError):
    """A stock operation failed; `stock_name` names the stock."""

    def __init__(self, message: str, *, stock_name: str | None = None) -> None:
        super().__init__(message)
        self.stock_name = stock_name


class StockQuantityError(StockError, ValueError):
    """A quantity does not fit the stock: an order asks for more units than are on sale in
    total, or put() would put fewer units on sale than orders have already taken."""


class StockCounterLostError(StockError):
    """put() found the stock's `taken` counter gone while orders are recorded: Redis lost
    it (eviction under an allkeys-* maxmemory-policy, a FLUSH or partial restore), and
    rebuilding the books from 0 taken would sell the units orders hold a second time.
    Nothing was changed; see the message for how to recover (`put(units, recount=True)`)."""


class OrderConflictError(StockError):
    """An order id that already took units was taken again with a different quantity:
    two different orders share one id, or a retry changed its quantity."""


class OrderSinkError(StockError):
    """An OrderSink could not finish its work; `stock_name` names the stock it serves."""


class DrainTimeout(OrderSinkError):
    """`OrderSink.drain()` did not empty the log within its timeout."""


class IdempotencyTimeout(SeawallError):
    """A duplicate delivery waited past its timeout while another process ran the handler.

    `message_id` names the message. Nothing was run or recorded for this delivery; let the
    broker redeliver it (nack/requeue) and the next attempt returns the recorded outcome.
    """

    def __init__(self, message: str, *, message_id: str | None = None) -> None:
        super().__init__(message)
        self.message_id = message_id


class IdempotentOutcomeError(SeawallError):
    """The handler already ran for this message, but its outcome was not recorded.

    Its return value could not be encoded as JSON (a datetime, a Decimal, an object), so
    the run was recorded as done without it: the caller that ran the handler got the live
    value, later deliveries get this error. The message is handled: ack it. Return plain
    JSON types from the handler to have the outcome recorded.
    """

    def __init__(self, message: str, *, message_id: str | None = None) -> None:
        super().__init__(message)
        self.message_id = message_id


class ClusterClientError(SeawallError, TypeError):
    """A plain redis.Redis client talks to a Redis Cluster node: it cannot follow the
    cluster's slots (the node answered MOVED, ASK or CROSSSLOT). Pass a
    redis.cluster.RedisCluster (redis.asyncio.cluster.RedisCluster for seawall.aio)."""
