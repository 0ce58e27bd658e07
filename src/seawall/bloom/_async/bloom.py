"""seawall.aio.BloomFilter: "surely absent" or "maybe present", shared through Redis.

The filter is one Redis string used as a bitmap (plus a tiny signature key beside it, under
the same hash tag, so every script runs on Redis Cluster). Each item's digest is computed
here (`seawall.bloom._arithmetic`); the scripts walk its k bit offsets and set or read
them, in batches of `BATCH` items per script call and up to `PIPELINE` calls per round
trip.

A filter exists in Redis only once created: `create()` (or `clear()`) writes it, and
`add` never does. A filter whose keys are all gone (never created, or lost to FLUSHALL,
eviction or a failover to an empty replica) raises BloomFilterError rather than reading as
empty, which would report every item it held as absent.

With `backend="auto"` the server's own BF.* commands (RedisBloom, valkey-bloom) are used
when it has them; they are looked for once per filter object.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from redis.exceptions import NoScriptError, RedisError

from seawall.bloom import _arithmetic
from seawall.errors import BloomFilterError
from seawall.shared import _scripts
from seawall.shared._async.scripts import run_script
from seawall.shared._concurrency import async_membership
from seawall.shared._keys import tagged
from seawall.shared._validate import check_async_client, check_name

_ADD = _scripts.load("seawall.bloom", "bloom_add")
_CHECK = _scripts.load("seawall.bloom", "bloom_check")

# Items per script call: a few ms of work in Redis at k = 7, so other clients' commands
# are not held up, while the per-call overhead stays small.
BATCH = 500
# Script calls sent per round trip by add_many / contains_many.
PIPELINE = 64

BACKENDS = ("bitmap", "auto")


class AsyncBloomFilter:
    """A Bloom filter of `capacity` items at `error_rate` false positives, kept in Redis.

    Call `create()` once (it does nothing if the filter exists) before adding items.
    No false negatives: an added item is always found (unless the filter is cleared or its
    keys removed, which is detected and raised, see `BloomFilterError`). Items are str, bytes
    or int; 42, "42" and b"42" are the same item, as they are to Redis.
    """

    def __init__(
        self,
        client: Any,
        name: str,
        capacity: int,
        error_rate: float = 0.01,
        *,
        backend: str = "bitmap",
    ) -> None:
        self._client = check_async_client(client, "BloomFilter")
        self.name = check_name(name, "BloomFilter")
        self._sizing = _arithmetic.size(capacity, error_rate, name)
        if backend not in BACKENDS:
            raise ValueError(
                f"backend of Bloom filter {name!r} must be one of {BACKENDS}, got {backend!r}"
            )
        self.backend = backend
        self.key = tagged("bloom", name)
        self._signature_key = f"{self.key}:sig"
        self._keys = (self.key, self._signature_key)
        self._module_key = f"{self.key}:bf"  # the server's own filter type, if used
        self._module: bool | None = None if backend == "auto" else False

    def __repr__(self) -> str:
        return (
            f"<seawall.BloomFilter {self.name!r} capacity={self.capacity} "
            f"error_rate={self.error_rate} bits={self.size_bits} hashes={self.hash_count}>"
        )

    @property
    def capacity(self) -> int:
        return self._sizing.capacity

    @property
    def error_rate(self) -> float:
        return self._sizing.error_rate

    @property
    def size_bits(self) -> int:
        """m: bits in the bitmap."""
        return self._sizing.bits

    @property
    def size_bytes(self) -> int:
        """Memory the bitmap takes in Redis once its highest bit is set."""
        return self._sizing.bytes

    @property
    def hash_count(self) -> int:
        """k: bits set per item."""
        return self._sizing.hashes

    def expected_error_rate(self, items: int) -> float:
        """The false positive rate to expect once `items` distinct items were added."""
        return self._sizing.expected_error_rate(items)

    def __contains__(self, item: Any) -> bool:
        return async_membership(self, item)

    async def create(self) -> bool:
        """Create the filter, empty, if it does not exist; True when this call created it.

        Needed once before the first add: a filter that does not exist is an error for
        add and might_contain (see the class docstring). A filter that exists (even
        damaged, or sized otherwise) is left as it is.
        """
        if await self._uses_module():
            client: Any = self._client  # execute_command: untyped in redis
            try:
                await client.execute_command(
                    "BF.RESERVE", self._module_key, self.error_rate, self.capacity
                )
            except RedisError as exc:
                if "exists" not in str(exc).lower():
                    raise
                return False
            return True
        sizing = self._sizing
        args = (sizing.signature, sizing.hashes, sizing.bits, b"", "1")
        reply = await run_script(self._client, _ADD, self._keys, args)
        if int(reply[0]) == 4:
            return True
        if int(reply[0]) == 0:
            self._flags(reply)  # other sizing: raises
        return False  # it exists (damaged or not: the next add or check says which)

    async def add(self, item: Any) -> bool:
        """Add one item; True when it was not in the filter before (as far as it can tell)."""
        return (await self.add_many((item,)))[0]

    async def add_many(self, items: Iterable[Any]) -> list[bool]:
        """Add items in few round trips; per item, True when it was new to the filter."""
        encoded = self._encode(items)
        if await self._uses_module():
            return await self._module_call("BF.INSERT", encoded)
        return await self._bitmap_call(_ADD, encoded)

    async def might_contain(self, item: Any) -> bool:
        """False: the item was surely never added. True: it probably was."""
        return (await self.contains_many((item,)))[0]

    async def contains_many(self, items: Iterable[Any]) -> list[bool]:
        """`might_contain` for many items, in few round trips."""
        encoded = self._encode(items)
        if await self._uses_module():
            return await self._module_call("BF.MEXISTS", encoded)
        return await self._bitmap_call(_CHECK, encoded)

    async def clear(self) -> None:
        """Empty the filter: its keys are deleted, then it is created anew, empty."""
        await self._client.delete(*self._keys, self._module_key)
        await self.create()

    def _encode(self, items: Iterable[Any]) -> list[bytes]:
        if isinstance(items, str | bytes):
            raise TypeError(
                f"items of Bloom filter {self.name!r} must be an iterable of items, got a "
                f"single {type(items).__qualname__}: pass [item] or use add()/might_contain()"
            )
        return [_arithmetic.encode_item(item, self.name) for item in items]

    async def _bitmap_call(self, script: _scripts.LuaScript, encoded: list[bytes]) -> list[bool]:
        if not encoded:
            return []
        sizing = self._sizing
        head = (sizing.signature, sizing.hashes, sizing.bits)
        calls = []
        for batch in _arithmetic.batches(encoded, BATCH):
            calls.append((*head, _arithmetic.pack_starts(batch, sizing), ""))
        found: list[bool] = []
        for group in _arithmetic.batches(calls, PIPELINE):
            for reply in await self._run_all(script, group):
                found.extend(self._flags(reply))
        return found

    async def _run_all(self, script: _scripts.LuaScript, calls: Sequence[Any]) -> list[Any]:
        if len(calls) == 1:
            return [await run_script(self._client, script, self._keys, calls[0])]
        try:
            return await self._pipeline(script.sha, calls)
        except NoScriptError:
            # Not loaded yet (first use, restart, failover): no call ran. The first one now
            # loads the script on the filter's node, then the rest go pipelined again.
            first = await run_script(self._client, script, self._keys, calls[0])
            return [first, *await self._pipeline(script.sha, calls[1:])]

    async def _pipeline(self, sha: str, calls: Sequence[Any]) -> list[Any]:
        pipe: Any = self._client.pipeline(transaction=False)
        for args in calls:
            # Through execute_command: cluster pipelines refuse the evalsha() method, yet
            # route EVALSHA by its keys like any other command.
            pipe.execute_command("EVALSHA", sha, len(self._keys), *self._keys, *args)
        return list(await pipe.execute())

    def _flags(self, reply: list[Any]) -> list[bool]:
        status = int(reply[0])
        if status == 1:
            return [bool(flag) for flag in reply[1:]]
        if status == 0:
            stored = _scripts.reply_text(reply[1])
            raise BloomFilterError(
                f"Bloom filter {self.name!r} in Redis was built with other sizing ({stored}, "
                f"as scheme:bits:hashes) than this one ({self._sizing.signature}): use the "
                f"same capacity and error_rate everywhere, or clear() it and add the items "
                f"again",
                filter_name=self.name,
            )
        if status == 3:
            raise self._missing()
        raise BloomFilterError(
            f"Bloom filter {self.name!r} is damaged: {self.key!r} or {self._signature_key!r} "
            f"was removed without the other (evicted under maxmemory, or deleted by hand), so "
            f"it may have lost items: clear() it and add the items again, and keep its keys "
            f"out of eviction (maxmemory-policy noeviction or volatile-*)",
            filter_name=self.name,
        )

    def _missing(self) -> BloomFilterError:
        return BloomFilterError(
            f"Bloom filter {self.name!r} does not exist in Redis (no {self.key!r}): it was "
            f"never created, or it was lost with every item in it (FLUSHALL, eviction under "
            f"maxmemory, a failover to an empty replica). An empty filter would answer "
            f"'surely absent' for rows that exist, so it is not read as one. Rebuild it: "
            f"create() (or clear()), then add_many() every item from the source of truth; "
            f"keep its keys out of eviction",
            filter_name=self.name,
        )

    async def _uses_module(self) -> bool:
        if self._module is None:
            client: Any = self._client  # execute_command: untyped in redis
            try:
                await client.execute_command("BF.EXISTS", self._module_key, b"")
            except RedisError as exc:
                # A server's "unknown command", or a cluster client's own command table
                # ("... doesn't exist in Redis commands"): either way, no BF.* here.
                text = str(exc).lower()
                if "unknown command" not in text and "doesn't exist" not in text:
                    raise
                self._module = False
            else:
                self._module = True
        return self._module

    async def _module_call(self, command: str, encoded: list[bytes]) -> list[bool]:
        if not encoded:
            return []
        pipe: Any = self._client.pipeline(transaction=False)  # execute_command: untyped in redis
        # Asked in the same round trip: BF.MEXISTS reads a missing filter as empty.
        pipe.execute_command("EXISTS", self._module_key)
        for batch in _arithmetic.batches(encoded, BATCH):
            if command == "BF.INSERT":
                pipe.execute_command(command, self._module_key, "NOCREATE", "ITEMS", *batch)
            else:
                pipe.execute_command(command, self._module_key, *batch)
        try:
            exists, *replies = await pipe.execute()
        except RedisError as exc:
            if "not found" in str(exc).lower():
                raise self._missing() from exc
            raise
        if not int(exists):
            raise self._missing()
        return [bool(flag) for reply in replies for flag in reply]
