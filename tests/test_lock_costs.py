"""What an uncontended Lock costs the server: acquire + release is two requests and at most
six commands (the two EVALSHAs, SET NX PX and INCR of the fence, MGET and RENAME), the
least the guarantees need: the fence, the owner check, the memory that makes a replayed
release idempotent and the look for waiters. Counted, not timed: sync and asyncio, on one
server and on Cluster."""

from __future__ import annotations

from typing import Any

from cacheworld import command_calls, requests_sent
from conftest import Target

import seawall
import seawall.aio

CYCLES = 50
# What redis-py and the listeners send beside the calls measured (handshakes, keep-alives,
# a Cluster client's look at the slots), and the INFO that reads the figures.
BACKGROUND = {
    "info",
    "ping",
    "client",
    "hello",
    "subscribe",
    "psubscribe",
    "command",
    "cluster",
    "replconf",  # a replica's acknowledgements to its master, once a second
}


def commands_during(target: Target, before: dict[str, int]) -> dict[str, int]:
    after = command_calls(target)
    spent = {name: after[name] - before.get(name, 0) for name in after}
    return {name: count for name, count in spent.items() if count and name not in BACKGROUND}


def test_an_uncontended_cycle_is_two_requests_and_at_most_six_commands(
    target: Target, world: str
) -> None:
    if world == "sync":
        lock: Any = seawall.Lock(target.sync(), "costs", ttl=30.0)
        for _ in range(3):  # scripts loaded on the lock's node, connections open
            lock.acquire()
            lock.release()
        before = command_calls(target)
        with requests_sent() as sent:
            for _ in range(CYCLES):
                lock.acquire()
                lock.release()
    else:
        import asyncio

        async def cycles() -> tuple[dict[str, int], int]:
            client = target.aio()
            lock = seawall.aio.Lock(client, "costs", ttl=30.0)
            for _ in range(3):
                await lock.acquire()
                await lock.release()
            before = command_calls(target)
            with requests_sent() as sent:
                for _ in range(CYCLES):
                    await lock.acquire()
                    await lock.release()
            await client.aclose()
            return before, sent

        before, sent = asyncio.run(cycles())
    spent = commands_during(target, before)
    # The lock's own requests: each names its key (a background caller of another test's
    # object, in this worker process, may send one in the window).
    mine = [head for head in sent.heads if b"costs" in head]
    assert len(mine) == 2 * CYCLES, (len(mine), [h for h in sent.heads if h not in mine][:5])
    assert sum(spent.values()) <= 6 * CYCLES, spent
    assert spent["evalsha"] == 2 * CYCLES, spent
    assert spent.get("pexpire", 0) == 0 and spent.get("zrange", 0) == 0, spent


def test_a_release_after_contention_looks_at_the_queue_once_then_not_again(
    standalone: Target,
) -> None:
    """The queue marker a waiter leaves makes one release look at the queue; finding it
    empty, that release drops the marker, and the next one costs six commands again."""
    r = standalone.sync()
    holder = seawall.Lock(r, "after", ttl=30.0)
    waiter = seawall.Lock(r, "after", ttl=30.0)
    assert holder.acquire()
    # A queued try (as a blocked acquire makes) that then gives up.
    assert not waiter.acquire(timeout=0.05)
    assert r.exists(f"{holder.key}:queued") == 1
    before = command_calls(standalone)
    holder.release()
    first = commands_during(standalone, before)
    assert first.get("zrange") == 1, first
    assert r.exists(f"{holder.key}:queued") == 0
    before = command_calls(standalone)
    holder.acquire()
    holder.release()
    second = commands_during(standalone, before)
    assert sum(second.values()) <= 6, second


def test_an_uncontended_semaphore_cycle_is_two_requests_and_fourteen_commands(
    target: Target,
) -> None:
    """The Semaphore's cycle, by the same count: its queue, expired holders and fairness
    cost more than the Lock's six, but a first holder no longer looks for the longest
    lease of the others (ZRANGE) to set the key's expiry: 15 commands before, 14 now."""
    semaphore = seawall.Semaphore(target.sync(), "costs-sem", value=3, ttl=30.0)
    for _ in range(3):
        semaphore.acquire()
        semaphore.release()
    before = command_calls(target)
    with requests_sent() as sent:
        for _ in range(CYCLES):
            semaphore.acquire()
            semaphore.release()
    spent = commands_during(target, before)
    mine = [head for head in sent.heads if b"costs-sem" in head]
    assert len(mine) == 2 * CYCLES, len(mine)
    assert sum(spent.values()) <= 14 * CYCLES, spent
    assert spent.get("zrange", 0) == 0, spent
