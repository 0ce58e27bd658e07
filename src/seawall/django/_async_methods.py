"""The a* methods of seawall.django.RedisCache: Django's asyncio cache API on the event
loop, with a redis.asyncio client of that loop (never a thread, as Django's own backend
does), each the twin of a sync method in cache.py with the same semantics.

They are kept apart from the sync face as a base class of RedisCache; the options, the
keys and the answers while Redis is down (`_x`, the Extras) are RedisCache's.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Iterable, Mapping
from typing import Any

import redis.asyncio
import redis.asyncio.cluster
from asgiref.sync import sync_to_async
from django.core.cache.backends.base import DEFAULT_TIMEOUT, BaseCache
from django.core.exceptions import SynchronousOnlyOperation

from seawall.django._async.again import AsyncSecondDeletes
from seawall.django._async.store import AsyncRedisStore
from seawall.django._extras import (
    DOWN_VALUE,
    Extras,
    answer_down,
    answer_empty,
    answer_false,
    answer_none,
    answer_nothing,
    answer_unavailable,
)
from seawall.django._local import MISSING, per_loop
from seawall.shared._concurrency import async_call_loader


class AsyncMethods(BaseCache):
    """Django's a* cache methods on redis.asyncio; one store (client) per event loop."""

    # Set by RedisCache.__init__.
    _x: Extras
    _serializer: Any
    _lease: float
    _wait_timeout: float
    _stale_ttl: float | None
    _mutex: threading.Lock
    _where: Any
    _async_stores: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncRedisStore]
    # The class whose sync methods write in Django's thread (see _pickles_in_a_thread):
    # RedisCache's own, never a subclass's override, which may call an a* method back.
    _sync_face: type[Any]

    def async_client(self) -> redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster:
        """The asyncio redis-py client of the running event loop."""
        return self._astore().client

    def _astore(self) -> AsyncRedisStore:
        # asyncio connections belong to the loop that opened them: one client per loop
        # (shared by the instances of this process, see _local).
        loop = asyncio.get_running_loop()
        store = self._async_stores.get(loop)
        if store is None:
            with self._mutex:
                store = self._async_stores.get(loop)
                if store is None:
                    client = per_loop(
                        ("async client", self._where),
                        loop,
                        lambda: self._make_client(
                            redis.asyncio.Redis, redis.asyncio.cluster.RedisCluster
                        ),
                    )
                    store = self._async_stores[loop] = AsyncRedisStore(
                        client,
                        self._serializer,
                        lease=self._lease,
                        wait_timeout=self._wait_timeout,
                        stale_ttl=self._stale_ttl,
                    )
        return store

    async def _pickles_in_a_thread(self, name: str, *args: Any) -> Any:
        """Pickling a QuerySet runs its query (a model instance with deferred fields
        may too), which Django refuses on an event loop; the value is then written by
        the sync method `name` in Django's sync thread, as Django's default a* methods
        do. The refusal comes before anything is sent, so nothing is written twice."""
        method = getattr(self._sync_face, name)
        return await sync_to_async(method, thread_sensitive=True)(self, *args)

    async def aadd(
        self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: Any = None
    ) -> bool:
        made = self.make_and_validate_key(key, version=version)
        store = self._astore()
        seconds = self.get_backend_timeout(timeout)
        try:
            added = await self._x.aguarded(lambda: store.add(made, value, seconds), answer_false)
        except SynchronousOnlyOperation:  # see _pickles_in_a_thread
            added = await self._pickles_in_a_thread("add", key, value, timeout, version)
            return bool(added)
        if added:
            await self._x.achanged(store, [made])
        return added

    async def aget(self, key: Any, default: Any = None, version: Any = None) -> Any:
        made = self.make_and_validate_key(key, version=version)
        store = self._astore()
        local = self._x.local()
        if local is None:
            return await self._x.aguarded(
                lambda: store.get(made, default),
                lambda: self._x.stale_or(made, default, self._serializer.loads),
            )
        raw = local.get(made)
        if raw is not MISSING:
            return self._serializer.loads(raw)
        epoch = local.fill_epoch()
        raw, pttl = await self._x.aguarded(lambda: store.get_with_pttl(made), answer_nothing)
        return self._filled(local, made, raw, pttl, epoch, default)

    async def aset(
        self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: Any = None
    ) -> None:
        made = self.make_and_validate_key(key, version=version)
        store = self._astore()
        seconds = self.get_backend_timeout(timeout)
        try:
            await self._x.aguarded(lambda: store.set(made, value, seconds), answer_none)
        except SynchronousOnlyOperation:  # see _pickles_in_a_thread
            await self._pickles_in_a_thread("set", key, value, timeout, version)
            return
        await self._x.achanged(store, [made])

    async def atouch(self, key: Any, timeout: Any = DEFAULT_TIMEOUT, version: Any = None) -> bool:
        made = self.make_and_validate_key(key, version=version)
        store = self._astore()
        seconds = self.get_backend_timeout(timeout)
        touched = await self._x.aguarded(lambda: store.touch(made, seconds), answer_false)
        if touched:  # a copy held elsewhere must not outlive a shorter expiry
            await self._x.achanged(store, [made])
        return touched

    def _asecond_deletes(self, store: AsyncRedisStore) -> AsyncSecondDeletes:
        loop = asyncio.get_running_loop()
        key = ("async again", self._where, self._stale_ttl)
        return per_loop(key, loop, lambda: AsyncSecondDeletes(store, self._x.local))

    async def adelete(
        self, key: Any, version: Any = None, *, again_after: float | None = None
    ) -> bool:
        made = self.make_and_validate_key(key, version=version)
        store = self._astore()
        if again_after is not None:
            await self._asecond_deletes(store).schedule([made], again_after)
        deleted = await self._x.aguarded(lambda: store.delete(made), answer_false)
        await self._x.achanged(store, [made])
        return deleted

    async def aget_many(self, keys: Iterable[Any], version: Any = None) -> dict[Any, Any]:
        made = self._key_map(keys, version)
        store = self._astore()
        found = await self._x.aguarded(lambda: store.get_many(list(made)), answer_empty)
        return {made[key]: value for key, value in found.items()}

    async def ahas_key(self, key: Any, version: Any = None) -> bool:
        made = self.make_and_validate_key(key, version=version)
        local = self._x.local()
        if local is not None and local.get(made) is not MISSING:
            return True
        store = self._astore()
        return await self._x.aguarded(lambda: store.has_key(made), answer_false)

    async def aincr(self, key: Any, delta: int = 1, version: Any = None) -> int:
        made = self.make_and_validate_key(key, version=version)
        store = self._astore()
        value: int = await self._x.aguarded(
            lambda: store.incr(made, delta), answer_unavailable(made)
        )
        await self._x.achanged(store, [made])
        return value

    async def aset_many(
        self, data: Mapping[Any, Any], timeout: Any = DEFAULT_TIMEOUT, version: Any = None
    ) -> list[Any]:
        if not data:
            return []
        made = self._made(data, version)
        store = self._astore()
        seconds = self.get_backend_timeout(timeout)

        async def write() -> bool:
            await store.set_many(made, seconds)
            return True

        try:
            stored = await self._x.aguarded(write, answer_false)
        except SynchronousOnlyOperation:  # see _pickles_in_a_thread
            failed = await self._pickles_in_a_thread("set_many", data, timeout, version)
            return list(failed)
        await self._x.achanged(store, made)
        return [] if stored else list(data)

    async def adelete_many(
        self, keys: Iterable[Any], version: Any = None, *, again_after: float | None = None
    ) -> None:
        made = [self.make_and_validate_key(key, version=version) for key in keys]
        if made:
            store = self._astore()
            if again_after is not None:
                await self._asecond_deletes(store).schedule(made, again_after)
            await self._x.aguarded(lambda: store.delete_many(made), answer_none)
            await self._x.achanged(store, made)

    async def aclear(self) -> None:
        store = self._astore()
        await self._x.aguarded(
            lambda: store.clear(self._clear_prefix, self._clear_versioned),
            answer_unavailable("clear()"),
        )
        await self._x.acleared(store)

    async def aget_or_set(
        self, key: Any, default: Any, timeout: Any = DEFAULT_TIMEOUT, version: Any = None
    ) -> Any:
        """As get_or_set; `default` may also be an async function."""
        if not callable(default):
            found = await self.aget(key, self._missing_key, version=version)
            if found is not self._missing_key:
                return found
            await self.aadd(key, default, timeout, version)
            return await self.aget(key, default, version=version)
        made = self.make_and_validate_key(key, version=version)
        local = self._x.local()
        if local is not None:
            raw = local.get(made)
            if raw is not MISSING:
                return self._serializer.loads(raw)
        store = self._astore()
        seconds = self.get_backend_timeout(timeout)
        found = await self._x.aguarded(
            lambda: store.get_or_load(made, default, seconds), answer_down
        )
        if found is DOWN_VALUE:
            found = await async_call_loader(default)
        return found

    async def abegin_load(self, key: Any, version: Any = None) -> str | None:
        """begin_load() on the event loop."""
        made = self.make_and_validate_key(key, version=version)
        store = self._astore()
        return await self._x.aguarded(lambda: store.begin_load(made), answer_none)

    async def aend_load(self, key: Any, token: str, version: Any = None) -> None:
        made = self.make_and_validate_key(key, version=version)
        store = self._astore()
        await self._x.aguarded(lambda: store.end_load(made, token), answer_none)
