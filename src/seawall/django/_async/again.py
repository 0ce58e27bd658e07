"""The delayed double delete for seawall.django.RedisCache: `delete(key, again_after=s)`.

The second delete is seawall.Cache's (seawall/cache/_async/again.py): recorded in a sorted
set in Redis before the first delete, so it happens even if the caller dies right after,
and carried out exactly once by a process with a seawall.django cache on that Redis (each
process's sweeper, one per client; it looks at the schedule when deletes announced there
fall due). Carrying one
out deletes the made key as delete() does: the value, its load lease (a load in flight is
voided), and every process's L1 copy.

Every seawall.django cache of one Redis database shares one schedule: its members are
made keys (KEY_PREFIX and VERSION in them), which any of them deletes alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from seawall.cache._async.again import get_sweeper, schedule
from seawall.django._async.store import AsyncRedisStore
from seawall.django._extras import REDIS_DOWN
from seawall.django._local import invalidation
from seawall.errors import CacheUnavailable
from seawall.shared._validate import check_seconds

# The schedule's namespace: not a name of seawall.Cache's invalidation or key spaces
# that a Cache of the user's would take by accident.
NAMESPACE = "seawall.django"


class AsyncSecondDeletes:
    """What the sweeper calls to carry out due second deletes of Django's keys."""

    namespace = NAMESPACE

    def __init__(self, store: AsyncRedisStore, local: Callable[[], Any]) -> None:
        self._store = store
        self._local = local  # the process's L1 (LocalLevel), or None without one

    async def _drop_everywhere(self, texts: list[str]) -> None:
        await self.drop_everywhere(texts)

    async def drop_everywhere(self, keys: list[str]) -> None:
        """Delete the made `keys` as delete_many() does (values, load leases, every
        process's L1, whether this cache has an L1 or not), never through the breaker: a
        Redis error reaches the caller."""
        await self._store.delete_many(keys)
        local = self._local()
        # Published even without an L1 here: the deleter a process's sweeper picks may be
        # that of a cache without one, while another cache, or process, keeps copies.
        message = invalidation(keys) if local is None else local.dropped(keys)
        await self._store.publish(message)

    def serve(self) -> None:
        """Have this process (this event loop for asyncio) carry out the schedule's due
        second deletes, overdue ones of processes that died included."""
        get_sweeper(self._store.client).register(self)

    async def schedule(self, keys: list[str], again_after: Any) -> None:
        """Record second deletes of the made `keys`, `again_after` seconds from now (server
        time), before their first delete. Raises CacheUnavailable if Redis cannot take
        them; this process then retries the whole delete in the background."""
        delay = check_seconds(again_after, "again_after")
        sweeper = get_sweeper(self._store.client)
        sweeper.register(self)
        try:
            await schedule(self._store.client, NAMESPACE, keys, delay)
        except REDIS_DOWN as exc:
            sweeper.unrecorded(NAMESPACE, keys, delay)
            raise CacheUnavailable(
                f"seawall.django.RedisCache: could not record the delayed second delete of "
                f"{len(keys)} key(s) (first: {keys[0]!r}): {exc!r}. Nothing was deleted "
                "yet; this process retries the delete in the background until Redis answers",
                key=keys[0],
            ) from exc
        sweeper.due_in(NAMESPACE, delay)
