"""A cancelled waiter stops: asyncio's task.cancel() ends a blocked acquire every time.

redis-py's asyncio client can swallow a cancellation that lands while it reads a reply
(the call then returns normally). A waiter that carried on would try again for ever (one
such hang took 9 minutes in a parallel run); seawall checks after each try that its task
was not asked to stop. 100 cancellations at random moments of the waiting loop, for each
primitive: every one ends the acquire within a bound, and nothing is left queued.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from conftest import Target

import seawall.aio

ROUNDS = 100
BOUND = 2.0  # seconds from cancel() to the task's end: far above a round trip


def waiter_of(kind: str, client: Any) -> tuple[Any, Any]:
    """(holder, waiter) of `kind` on one name: the holder keeps the waiter waiting."""
    if kind == "lock":
        return seawall.aio.Lock(client, "cancel", ttl=30), seawall.aio.Lock(client, "cancel")
    if kind == "semaphore":
        return (
            seawall.aio.Semaphore(client, "cancel", value=1, ttl=30),
            seawall.aio.Semaphore(client, "cancel", value=1),
        )
    rw = seawall.aio.RWLock(client, "cancel", ttl=30)
    return rw.read(), rw.write()


@pytest.mark.parametrize("kind", ["lock", "semaphore", "write"])
def test_every_cancelled_acquire_ends(standalone: Target, kind: str) -> None:
    rng = random.Random(7)

    async def body() -> list[float]:
        client = standalone.aio()
        holder, waiter = waiter_of(kind, client)
        assert await holder.acquire()
        late: list[float] = []
        try:
            for _ in range(ROUNDS):
                task = asyncio.create_task(waiter.acquire())
                await asyncio.sleep(rng.uniform(0.0, 0.02))
                task.cancel()
                done, _ = await asyncio.wait({task}, timeout=BOUND)
                if not done:
                    late.append(BOUND)
                    task.cancel()
                    await asyncio.wait({task}, timeout=BOUND)
                    continue
                assert task.cancelled(), f"{kind}: the acquire ended with {task!r}"
            await holder.release()
            # Nothing of the cancelled waiters holds the name: a fresh acquire gets in.
            assert await waiter.acquire(timeout=5.0)
            await waiter.release()
        finally:
            await client.aclose()
        return late

    late = asyncio.run(body())
    assert late == [], f"{kind}: {len(late)} of {ROUNDS} cancelled acquires went on waiting"
