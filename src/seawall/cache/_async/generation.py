"""Generations of a seawall.aio.Cache namespace: clear() in O(1), and writes that name
the generation Redis holds.

Every entry key carries its namespace's generation (see _codec.cache_keys), kept in
its own key `seawall:cachegen:{<namespace>}` (absent: 0, a namespace never cleared, whose
entries have the names they always had). clear() moves it on with one script, which also
publishes the new generation to every process's invalidation listener: one command
whatever the number of entries. The old generation's entries are never read again and
expire by their own ttl.

A read names entries with the generation this process's listener keeps (see
invalidation.py), which may lag behind a clear elsewhere for as long as its message takes
to arrive. A write (set, delete, a second delete, the change-log follower) must not lag:
a delete that voided only the old generation's lease would let a load that started under
the new one, from a database read older than the delete, write back. So on one server
every write script runs behind a check of the generation it names (cache_at_generation.lua,
in the same script call: no extra round trip), and a refused one is made again under the
generation the check returns. On Cluster, where the generation key has a slot of its own,
a write reads it in the same pipelined round trip and is made again if it named another.
Either way the generation written under was current after the caller's own database
write, and any load under a later one started after that.

A generation key is never trusted to go back. Read below the highest generation this
process saw, it was lost (evicted, deleted, a failover to a replica without it): a new
generation above both is started and announced as a clear is, rather than naming entries
with a generation whose entries may predate a clear. A process that never saw the old
value cannot tell a lost key from a namespace never cleared, and reads generation 0 until
one that did restores it (docs/cache.md, docs/eviction.md).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import redis.asyncio.cluster
from redis.exceptions import NoScriptError

from seawall.cache import _invalidation_message as message_format
from seawall.cache._async.base import _VOID, AsyncCacheBase
from seawall.cache._codec import CACHE_WAKE_PREFIX, cache_keys, generation_key, parse_generation
from seawall.shared import _concurrency, _scripts

_GENERATION = _scripts.load("seawall.cache", "cache_generation")

# A script call: (script, keys, args).
Call = tuple[_scripts.LuaScript, Sequence[str], Sequence[Any]]


def checked(call: Call, namespace: str, generation: int) -> Call:
    """`call` (cache_store or cache_void, on entry keys of `generation`) behind the check
    that the namespace is at that generation (one server only: see the module's docstring)."""
    script, keys, args = call
    return (
        _scripts.with_prelude("cache_at_generation", script),
        (*keys, generation_key(namespace)),
        (*args, str(generation)),
    )


def refused(reply: Any) -> int | None:
    """The generation the namespace is at, if a checked call was refused for naming
    another one (None: it ran). A refusal is a list of one string; the scripts answer
    integers, or lists of them (cache_store_many)."""
    if isinstance(reply, list) and not isinstance(reply[0], int):
        return parse_generation(reply[0])
    return None


async def router(client: Any) -> Callable[[str], dict[str, Any]]:
    """What routes a pipelined command to the node that holds its first key: the keyword
    arguments of pipe.execute_command (none on one server). Routed here on Cluster, as
    redis-py's sync cluster pipeline would ask a server for the keys of each EVALSHA
    (COMMAND GETKEYS), a round trip each. A MOVED reply is followed."""
    if not isinstance(client, redis.asyncio.cluster.RedisCluster):
        return lambda key: {}
    cluster: Any = client  # the sync cluster client is untyped
    initialize = getattr(cluster, "initialize", None)  # asyncio: learn the slots
    if initialize is not None:
        await initialize()
    return lambda key: {"target_nodes": cluster.get_node_from_key(key)}


async def pipelined(client: Any, calls: Sequence[Call], read: str | None = None) -> list[Any]:
    """Run `calls` in one pipelined round trip (on Cluster, one per node, all sent before
    any reply is read), after a GET of `read` if given (its reply comes first). After a
    NOSCRIPT (a restarted or flushed server) the scripts are loaded (on every primary of
    a Cluster) and the whole lot sent again: every cache script may run twice."""

    route = await router(client)

    async def send() -> list[Any]:
        pipe = client.pipeline(transaction=False)
        if read is not None:
            pipe.execute_command("GET", read, **route(read))
        for script, keys, args in calls:
            # Not pipe.evalsha(), which a Cluster pipeline refuses.
            pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args, **route(keys[0]))
        return list(await pipe.execute())

    try:
        return await send()
    except NoScriptError:
        for script in {call[0] for call in calls}:
            await client.script_load(script.source)
        return await send()


async def void_entries(
    client: Any,
    entries: Sequence[tuple[str, str, str, str]],
    generations: dict[str, int],
) -> None:
    """Run the delete script (cache_void) for many entries: (namespace, key text,
    invalidation channel, message) each, under each namespace's generation as Redis
    holds it (see the module's docstring). One pipelined round trip on one server when
    `generations` (namespace -> generation, updated here) guessed right; on Cluster one
    read of the generations, then one pipeline per node. The first error is raised: the
    caller retries the lot (deleting twice is harmless). What the change-log follower
    runs, so it deletes as Cache.delete_many does."""

    def call(entry: tuple[str, str, str, str], generation: int) -> Call:
        name, text, channel, message = entry
        args = ("", CACHE_WAKE_PREFIX, channel, message)
        return (_VOID, cache_keys(name, text, generation).all, args)

    names = list(dict.fromkeys(entry[0] for entry in entries))
    if isinstance(client, redis.asyncio.cluster.RedisCluster):
        found = await client.mget_nonatomic([generation_key(name) for name in names])
        generations.update(
            (name, parse_generation(reply)) for name, reply in zip(names, found, strict=True)
        )
        await pipelined(client, [call(entry, generations[entry[0]]) for entry in entries])
        return
    pending = list(entries)
    while pending:
        calls = []
        for entry in pending:
            generation = generations.get(entry[0], 0)
            calls.append(checked(call(entry, generation), entry[0], generation))
        replies = await pipelined(client, calls)
        again = []
        for entry, reply in zip(pending, replies, strict=True):
            current = refused(reply)
            if current is not None:
                generations[entry[0]] = current
                again.append(entry)
        pending = again


class AsyncCacheGenerations(AsyncCacheBase):
    """The generation of a seawall.aio.Cache's namespace, and writes under it."""

    async def _generation_seen(self, generation: int, token: int | None) -> int:
        """`generation`, just read from Redis, unless it is below one seen here: then its
        key was lost (evicted, deleted, a failover), and naming entries with it again could
        bring back entries older than a clear(). A new generation above both is started
        then, announced as a clear is."""
        invalidator = self._invalidator_here()
        highest = invalidator.highest_generation(self.namespace)
        if generation >= highest:
            invalidator.learn_generation(self.namespace, generation, token)
            return generation
        restored = await self._new_generation(str(highest))
        if restored > highest:
            _concurrency.log.warning(
                "cache %r: its generation key %r held %d, below generation %d seen "
                "before (evicted, deleted or lost in a failover); started generation %d "
                "above both, as clear() does. Keep it from eviction: see docs/eviction.md",
                self.namespace,
                generation_key(self.namespace),
                generation,
                highest,
                restored,
            )
        return restored

    async def _new_generation(self, floor: str) -> int:
        """Move the namespace to a new generation (cache_generation.lua: `floor` "" to
        clear, else restore above it if the key is below) and empty every L1 of it, here
        and, by the message the script publishes, in every other process."""
        invalidator = self._invalidator_here()
        token = invalidator.generation_token()
        channel = message_format.cleared_channel(self.namespace)
        head = message_format.encode(invalidator.id, message_format.CLEAR)
        key = generation_key(self.namespace)
        reply = await self._command(_GENERATION, (key,), (floor, channel, head))
        generation = parse_generation(reply[0])
        # Known before the L1s are emptied: a read that finds them emptied (its L1 epoch
        # taken after this) names entries with the new generation.
        invalidator.learn_generation(self.namespace, generation, token)
        if int(reply[1]):
            self.l1.clear()
            invalidator.clear_local(self.namespace, skip=self.l1)
        return generation

    async def _at_current(
        self, calls_at: Callable[[int], list[Call]], *, guarded: bool, versioned: bool = False
    ) -> list[Any]:
        """The replies of the calls `calls_at(generation)` makes for the namespace's
        generation as Redis holds it when they run (see the module's docstring). Held to
        a connection slot, and to the breaker if `guarded`. `versioned`: the calls write a
        key's version, which every generation shares, so on Cluster they are never made
        under a generation that may prove stale."""
        invalidator = self._invalidator_here()
        token = invalidator.generation_token()
        known = invalidator.known_generation(self.namespace)
        generation = invalidator.highest_generation(self.namespace) if known is None else known
        made = calls_at(generation)
        if isinstance(self._client, redis.asyncio.cluster.RedisCluster):
            if versioned:
                generation = await self._generation_read(guarded=guarded)
                return await self._calls(calls_at(generation), guarded)
            return await self._at_current_on_cluster(calls_at, made, generation, token, guarded)
        replies: list[Any] = [None] * len(made)
        pending = list(range(len(made)))
        while True:
            calls = [checked(made[i], self.namespace, generation) for i in pending]
            got = await self._calls(calls, guarded)
            current = None
            again = []
            for i, reply in zip(pending, got, strict=True):
                found = refused(reply)
                if found is None:
                    replies[i] = reply
                else:
                    current = max(current or 0, found)
                    again.append(i)
            if current is None:
                if known is None:  # confirmed by the scripts, after `token` was taken
                    invalidator.learn_generation(self.namespace, generation, token)
                return replies
            # A clear came that our listener has not told us of yet (or the key was
            # lost): name entries with the generation Redis holds, and write again.
            generation = await self._generation_seen(current, token)
            made, pending = calls_at(generation), again

    async def _at_current_on_cluster(
        self,
        calls_at: Callable[[int], list[Call]],
        made: list[Call],
        guess: int,
        token: int | None,
        guarded: bool,
    ) -> list[Any]:
        """_at_current on Cluster, where a script cannot read the generation's key (a slot
        of its own): the calls `made` under the generation this process knows go in the
        same pipelined round trip as a GET of that key. Read after the caller's database
        write, the key still at `guess` means any load under a later generation starts
        after that write, so the calls stand whichever of them ran first; at another
        generation, they are made again under it (the first ones touched only entries of
        a generation nobody reads any more: never a version, see `versioned`)."""
        key = generation_key(self.namespace)
        send = functools.partial(pipelined, self._client, made, key)
        read, *replies = await self._held((key,), send, guarded)
        generation = await self._generation_seen(parse_generation(read), token)
        if generation == guess:
            return list(replies)
        return await self._calls(calls_at(generation), guarded)

    async def _calls(self, calls: Sequence[Call], guarded: bool) -> list[Any]:
        """The replies of script calls: a single one run alone, more pipelined in one round
        trip (one per node on Cluster). Held to a connection slot, and to the breaker if
        `guarded`."""
        if len(calls) == 1:
            run = self._redis if guarded else self._command
            return [await run(*calls[0])]
        send = functools.partial(pipelined, self._client, calls)
        return list(await self._held(calls[0][1], send, guarded))

    async def _drop_everywhere(self, texts: list[str]) -> None:
        """Delete entries from Redis, under the namespace's current generation, and from
        every process's L1, voiding loads in flight. Deleting again changes nothing."""
        if not texts:
            return
        for text in texts:
            self.l1.discard(text)
        messages = [self._invalidation(text) for text in texts]

        def calls_at(generation: int) -> list[Call]:
            return [
                (
                    _VOID,
                    cache_keys(self.namespace, text, generation).all,
                    ("", CACHE_WAKE_PREFIX, channel, message),
                )
                for text, (channel, message) in zip(texts, messages, strict=True)
            ]

        await self._at_current(calls_at, guarded=False)
        # Again once Redis no longer holds the values: a read of this process that fetched
        # one between the first drop and the write must not keep it (our own invalidation
        # messages are ignored here). The drop moves the epoch on, so that read's fill fails.
        for text in texts:
            self.l1.discard(text)
        self._dropped_here(*texts)
