"""After its own delete() or set() returns, a process never serves the old value from its
L1 (issue 10, item 8).

The process ignores its own invalidation message, so the L1 must be dropped (and its epoch
moved on) after the Redis write returns: a read of the same process that fetched the old
value before the write must not store it in the L1 afterwards. The windows are widened
with real means only: CLIENT PAUSE WRITE holds the write while plain reads (MGET) go on,
and a serializer whose loads() waits for the test holds a read between Redis and the L1.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Iterator
from typing import Any

from conftest import Target

import seawall
import seawall.aio

WAIT = 10.0


def value_key(namespace: str, key: str) -> str:
    return f"seawall:cache:{{{namespace}:{key}}}:value"


@contextlib.contextmanager
def writes_paused(target: Target, redis_key: str) -> Iterator[None]:
    """Writes (scripts included) wait on the key's server; plain reads are answered."""
    admin = target.sync()
    nodes: dict[str, Any] = {}
    if target.cluster:
        nodes["target_nodes"] = admin.get_node_from_key(redis_key)
    admin.client_pause(int(WAIT * 1000), all=False, **nodes)
    try:
        yield
    finally:
        admin.client_unpause(**nodes)


class HeldJson:
    """JSON, except that decoding `held` waits (once) until the test lets it go on."""

    name = "json"

    def __init__(self, held: Any) -> None:
        self.held = json.dumps(held).encode()
        self.entered = threading.Event()
        self.go_on = threading.Event()
        self.armed = False

    def dumps(self, value: Any) -> bytes:
        return json.dumps(value).encode()

    def loads(self, data: bytes) -> Any:
        if self.armed and bytes(data) == self.held:
            self.armed = False
            self.entered.set()
            assert self.go_on.wait(WAIT)
        return json.loads(data)


def listening(cache: Any) -> None:
    listener = cache._listener()
    assert listener is not None and listener.wait_listening(WAIT)


async def listening_async(cache: Any) -> None:
    listener = cache._listener()
    assert listener is not None and await listener.wait_listening(WAIT)


def test_read_held_across_own_set_does_not_refill_l1(target: Target) -> None:
    # A reader of this process fetched "old" before set("new") and stores it in the L1
    # only after set() returned: the L1 must refuse it.
    r = target.sync()
    codec = HeldJson("old")
    cache = seawall.Cache(r, "ownset", ttl=60, serializer=codec)
    listening(cache)
    cache.set("k", "old")
    cache.l1.discard(cache._key("k"))  # the read below must go to Redis
    codec.armed = True
    seen: list[Any] = []
    reader = threading.Thread(target=lambda: seen.append(cache.get("k")))
    reader.start()
    assert codec.entered.wait(WAIT)  # the reader has "old" from Redis, not yet in the L1
    cache.set("k", "new")
    codec.go_on.set()
    reader.join(WAIT)
    assert seen == ["old"]  # it began before the write: either answer was fine for it
    assert [cache.get("k") for _ in range(3)] == ["new"] * 3


def test_readers_during_own_delete_do_not_keep_old_value(target: Target) -> None:
    # Threads hammer get() while delete() waits on a paused server; once it returns, no
    # get() of this process answers the old value.
    r = target.sync()
    cache = seawall.Cache(r, "owndel", ttl=60)
    listening(cache)
    cache.set("k", "old")
    assert cache.get("k") == "old"
    stop = threading.Event()
    reads = [0]
    after: list[Any] = []
    deleted = threading.Event()

    def hammer() -> None:
        while not stop.is_set():
            begun_after = deleted.is_set()
            found = cache.get("k")
            reads[0] += 1
            if begun_after:
                after.append(found)

    readers = [threading.Thread(target=hammer) for _ in range(4)]
    with writes_paused(target, value_key("owndel", "k")):
        epoch = cache.l1.epoch
        deleter = threading.Thread(target=lambda: (cache.delete("k"), deleted.set()))
        deleter.start()
        for thread in readers:
            thread.start()
        for _ in range(int(WAIT * 100)):  # the first drop, then some reads after it
            if cache.l1.epoch != epoch:
                break
            threading.Event().wait(0.01)
        assert cache.l1.epoch != epoch
        seen = reads[0]
        while reads[0] < seen + 20 and deleter.is_alive():
            threading.Event().wait(0.001)
        assert deleter.is_alive()  # the delete waits for the pause
    deleter.join(WAIT)
    assert deleted.is_set()
    late = [cache.get("k") for _ in range(3)]
    stop.set()
    for thread in readers:
        thread.join(WAIT)
    assert late == [None] * 3
    assert set(after) <= {None}


async def hammer(cache: Any, done: asyncio.Event, reads: list[int], after: list[Any]) -> None:
    """get() until one that began after the write returned has answered."""
    while True:
        begun_after = done.is_set()
        found = await cache.get("k")
        reads[0] += 1
        if begun_after:
            after.append(found)
            return
        await asyncio.sleep(0)


def test_tasks_during_own_delete_and_set_do_not_keep_old_value(target: Target) -> None:
    async def main() -> None:
        r = target.aio()
        try:
            cache = seawall.aio.Cache(r, "owndel-aio", ttl=60)
            await listening_async(cache)
            for write in ("delete", "set"):
                await cache.set("k", "old")
                assert await cache.get("k") == "old"
                done = asyncio.Event()
                after: list[Any] = []
                reads = [0]

                with writes_paused(target, value_key("owndel-aio", "k")):
                    epoch = cache.l1.epoch
                    if write == "delete":
                        writer = asyncio.ensure_future(cache.delete("k"))
                    else:
                        writer = asyncio.ensure_future(cache.set("k", "new"))
                    readers = [
                        asyncio.ensure_future(hammer(cache, done, reads, after)) for _ in range(4)
                    ]
                    while reads[0] < 40:
                        await asyncio.sleep(0.001)
                    assert not writer.done()  # the write waits for the pause
                    if write == "delete":
                        assert cache.l1.epoch != epoch  # the first drop came before it
                await asyncio.wait_for(writer, WAIT)
                done.set()
                await asyncio.wait_for(asyncio.gather(*readers), WAIT)
                expected = None if write == "delete" else "new"
                late = [await cache.get("k") for _ in range(3)]
                assert late == [expected] * 3, write
                assert set(after) <= {expected}, write
        finally:
            await r.aclose()

    asyncio.run(main())
