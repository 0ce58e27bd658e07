"""Groups of entries of seawall.aio.Cache: delete_many, tags (delete_tag) and clear().

A tag is a Redis set of the entry keys written with it, under its own hash tag
`{cachetag:<namespace>:<tag>}`: on Cluster it lives on one node while its entries are
spread over all, so tagging is its own call, made before the entry is written. A
delete_tag that runs between the two finds the key in the set and deletes it, voiding the
load in flight (a load cannot write back after a delete), so no entry written under a tag
survives a delete_tag that began after the entry was tagged.

clear() moves the namespace to a new generation: one script, whatever the number of
entries, on one server and on Cluster (see generation.py). Tags are kept: a tag's
set names key texts, which delete_tag deletes under the generation current then.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from seawall.cache._async.again import get_sweeper, schedule
from seawall.cache._async.base import REDIS_DOWN, ms
from seawall.cache._async.bulk import AsyncCacheBulk
from seawall.cache._async.writes import BATCH
from seawall.errors import CacheUnavailable
from seawall.shared import _scripts
from seawall.shared._concurrency import async_call_loader
from seawall.shared._keys import tagged
from seawall.shared._validate import check_seconds

_TAG = _scripts.load("seawall.cache", "cache_tag")


def tag_key(namespace: str, tag: str) -> str:
    return tagged("cachetag", f"{namespace}:{tag}")


class AsyncCacheTags(AsyncCacheBulk):
    """Tags and clear() of seawall.aio.Cache."""

    def _tags(self, tags: Iterable[str] | None) -> tuple[str, ...]:
        if tags is None:
            return ()
        if isinstance(tags, str):
            tags = (tags,)
        checked = tuple(dict.fromkeys(tags))
        for tag in checked:
            if not isinstance(tag, str) or not tag:
                raise TypeError(
                    f"cache {self.namespace!r}: a tag must be a non-empty str, got {tag!r}"
                )
        return checked

    async def _tag(self, tags: tuple[str, ...], texts: list[str], ttl: float | None) -> None:
        """Add `texts` to each tag's set, living at least as long as any of the entries."""
        longest = ms(
            max(self.ttl if ttl is None else ttl, self.absent_ttl) * (1 + self.jitter)
            + self.stale_ttl
        )
        for tag in tags:
            for start in range(0, len(texts), BATCH):
                await self._redis(
                    _TAG, (tag_key(self.namespace, tag),), (longest, *texts[start : start + BATCH])
                )

    def _tagging_loader(
        self, tags: tuple[str, ...], text: str, loader: Callable[[], Any], ttl: float | None
    ) -> Callable[[], Any]:
        """`loader`, tagging the key first: only a process that loads (and then writes)
        the entry tags it, before the write (see the module's docstring)."""
        if not tags:
            return loader

        async def tag_then_load() -> Any:
            await self._tag(tags, [text], ttl)
            return await async_call_loader(loader)

        return tag_then_load

    async def delete_many(self, keys: Iterable[Any], *, again_after: float | None = None) -> int:
        """delete() for many keys: one round trip on one server (one per key on Cluster).

        Every key is checked before anything is deleted; returns how many were given.
        """
        texts = list(dict.fromkeys(self._key(key) for key in keys))
        delay = self._again_after(again_after)
        if delay is not None:
            await self._schedule_again(texts, delay)
        for start in range(0, len(texts), BATCH):
            await self._drop_everywhere(texts[start : start + BATCH])
        return len(texts)

    def _again_after(self, again_after: Any) -> float | None:
        if again_after is None:
            return None
        return check_seconds(again_after, f"again_after of cache {self.namespace!r}")

    async def _schedule_again(self, texts: list[str], delay: float) -> None:
        """Record second deletes in Redis; if Redis cannot take them, this process keeps
        retrying the whole delete in the background, and the caller is told."""
        sweeper = get_sweeper(self._client)
        try:
            await schedule(self._client, self.namespace, texts, delay)
        except REDIS_DOWN as exc:
            sweeper.unrecorded(self.namespace, texts, delay)
            raise CacheUnavailable(
                f"cache {self.namespace!r}: could not record the delayed second delete of "
                f"{len(texts)} key(s) (first: {texts[0]!r}): {exc!r}. Nothing was deleted "
                "yet; this process retries the delete in the background until Redis answers",
                key=texts[0],
            ) from exc
        sweeper.due_in(self.namespace, delay)

    async def delete_tag(self, tag: str) -> int:
        """Delete every entry written with `tag` (set(..., tags=), get_or_load(..., tags=),
        @cached(tags=)), as delete_many() does: in Redis and every process's L1, loads in
        flight voided. Returns how many keys the tag held."""
        (name,) = self._tags((tag,))
        key = tag_key(self.namespace, name)
        members = await self._client.smembers(key)
        texts = sorted(_scripts.reply_text(member) for member in members)
        if texts:
            await self.delete_many(texts)
            for start in range(0, len(texts), BATCH):
                await self._client.srem(key, *texts[start : start + BATCH])
        return len(texts)

    async def clear(self) -> None:
        """Delete every entry of this namespace, in O(1): one script moves the namespace
        to a new generation, which names a fresh, empty set of entries, and tells every
        process's invalidation listener. The caller reads none of the old entries once
        this returns, every other process none once the message reaches its listener (as
        its L1 copies are dropped then); a load in flight writes its value under the old
        generation, never read again. The old entries expire by their own ttl (their
        memory is freed then, not now). See docs/cache.md."""
        await self._new_generation("")
