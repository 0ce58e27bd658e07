"""Plain reads of entries of several seawall.aio.Cache objects in one round trip: what a
reader that needs entries of many namespaces at once sends (seawall.sqlalchemy's
QueryCache: the version tokens of the tables a result reads, and the result itself).

Each entry is read as a Cache's own fresh hit is (its value and hit marker: see
AsyncCacheBase._hit), all in one MGET on one server; on Cluster, where every entry has a
slot of its own, one MGET per entry in one pipeline, sent to every node before any reply
is read (one round trip per node touched, in parallel).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import redis.asyncio.cluster

from seawall.cache._async.base import AsyncCacheBase
from seawall.cache._async.generation import router


async def plain_reads(
    reads: Sequence[tuple[AsyncCacheBase, str]],
) -> list[Callable[[], Any]] | None:
    """For each (cache, key text), what the cache's plain read of that key answers: a call
    giving the value (None for one cached as absent) if Redis holds it fresh, else MISSING,
    that also counts the hit and keeps the value in the cache's L1. A caller that turns
    an answer down (it asked for a key it only guessed) does not make its call: nothing
    is counted or kept for it.

    None, and nothing sent, if a cache's generation is not known here yet (its keys cannot
    be named without a read first). The caches share one client: the first one's
    connection slots and circuit breaker hold the round trip."""
    epochs = [cache._fill_epoch() for cache, _ in reads]  # before the generation: see _hit
    names = []
    for cache, text in reads:
        keys = cache._known_keys(text)
        if keys is None:
            return None
        names.append(keys.read)
    first = reads[0][0]
    send = functools.partial(_read_pairs, first._client, names)
    replies = await first._held(names[0], send, guarded=True)
    return [
        functools.partial(cache._plain_hit, text, reply[0], reply[1], epoch)
        for (cache, text), reply, epoch in zip(reads, replies, epochs, strict=True)
    ]


async def _read_pairs(client: Any, names: list[tuple[str, str]]) -> list[tuple[Any, Any]]:
    """(value, hit marker) of each entry (`names`: their read keys), in one round trip."""
    if not isinstance(client, redis.asyncio.cluster.RedisCluster):
        flat = await client.execute_command("MGET", *(name for pair in names for name in pair))
        return list(zip(flat[::2], flat[1::2], strict=True))
    route = await router(client)
    cluster: Any = client  # the sync cluster client is untyped
    pipe = cluster.pipeline(transaction=False)
    for pair in names:
        pipe.execute_command("MGET", *pair, **route(pair[0]))
    return [(stored, lead) for stored, lead in await pipe.execute()]
