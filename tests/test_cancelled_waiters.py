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
import time
from typing import Any

import pytest
import redis.asyncio
from conftest import Target
from swallowing import SwallowingClient

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


@pytest.mark.parametrize("role", ["waiter", "loader"])
def test_a_cache_read_whose_script_swallowed_its_cancel_still_stops(
    seawall_url: str, role: str
) -> None:
    """A get_or_load whose fetch script lost the task's cancel stops at once: a waiter does
    not wait for another process's load (before the fix: until that load ended, up to the
    lease), a loader does not call its loader and gives the lease back at once."""

    async def body() -> tuple[float, bool, int]:
        other = redis.asyncio.Redis.from_url(seawall_url)
        client = SwallowingClient.from_url(seawall_url)
        client.entered = asyncio.Event()
        loading = asyncio.Event()
        calls = 0

        async def slow() -> str:
            loading.set()
            await asyncio.sleep(BOUND + 3)
            return "slow"

        async def counted() -> str:
            nonlocal calls
            calls += 1
            return "loaded"

        holder = seawall.aio.Cache(other, "swallow", ttl=60, lease=60)
        reader = seawall.aio.Cache(client, "swallow", ttl=60, lease=60)
        await reader.get("warm")  # the first use's own calls, before the armed one
        held = None
        if role == "waiter":  # another process is loading the key: the reader must wait
            held = asyncio.create_task(holder.get_or_load("k", slow))
            await asyncio.wait_for(loading.wait(), 10)
        client.armed = "EVALSHA"
        task = asyncio.create_task(reader.get_or_load("k", counted))
        await asyncio.wait_for(client.entered.wait(), 10)
        started = time.monotonic()
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=BOUND + 5)
        took = time.monotonic() - started
        cancelled = bool(done) and task.cancelled()
        if held is not None:
            held.cancel()
            await asyncio.gather(held, return_exceptions=True)
        else:
            # The lease the swallowed fetch took is given back at once: another loads now,
            # not once the lease (60 s here) has run out.
            async with asyncio.timeout(BOUND):
                assert await holder.get_or_load("k", counted) == "loaded"
        await client.aclose()
        await other.aclose()
        return took, cancelled, calls

    took, cancelled, calls = asyncio.run(body())
    assert took < BOUND, f"the cancelled read went on for {took:.1f} s"
    assert cancelled
    assert calls == (0 if role == "waiter" else 1)  # only the other cache's load ran


def test_a_sink_run_whose_read_swallowed_its_cancel_still_ends(
    seawall_url: str, tmp_path: Any
) -> None:
    """OrderSink.run() is a task an application cancels to stop; its XREADGROUP swallowing
    that cancel left it looping until a stop flag that never comes (before the fix)."""

    async def body() -> tuple[float, bool]:
        client = SwallowingClient.from_url(seawall_url)
        client.entered = asyncio.Event()
        stock = seawall.aio.Stock(client, "sku:cancel")
        await stock.put(3)
        sink = seawall.aio.OrderSink(client, stock, str(tmp_path / "orders.db"))
        await sink.drain(timeout=10)  # the group made, nothing to save: run() now blocks
        client.armed = "XREADGROUP"
        task = asyncio.create_task(sink.run(block=0.2))
        await asyncio.wait_for(client.entered.wait(), 10)
        started = time.monotonic()
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=BOUND + 3)
        took = time.monotonic() - started
        if not done:
            task.cancel()  # the fault found: stop it for good
        sink.close()
        await client.aclose()
        return took, bool(done) and task.cancelled()

    took, cancelled = asyncio.run(body())
    assert took < BOUND, f"the cancelled run went on for {took:.1f} s"
    assert cancelled


@pytest.mark.parametrize("role", ["duplicate", "claimant"])
def test_an_idempotent_run_whose_claim_swallowed_its_cancel_still_stops(
    seawall_url: str, role: str
) -> None:
    """A duplicate waited until the claimant finished (up to `timeout`); a claimant ran the
    handler. Now both stop, and the claimant's claim is abandoned at once."""

    async def body() -> tuple[float, bool, int]:
        other = redis.asyncio.Redis.from_url(seawall_url)
        client = SwallowingClient.from_url(seawall_url)
        client.entered = asyncio.Event()
        runs = 0
        running = asyncio.Event()

        async def slow() -> str:
            running.set()
            await asyncio.sleep(BOUND + 5)
            return "slow"

        async def counted() -> str:
            nonlocal runs
            runs += 1
            return "ran"

        first = seawall.aio.Idempotent(other, "cancel", lease=60)
        second = seawall.aio.Idempotent(client, "cancel", lease=60)
        held = None
        if role == "duplicate":  # another process runs the message: the caller must wait
            held = asyncio.create_task(first.run("m1", slow))
            await asyncio.wait_for(running.wait(), 10)
        client.armed = "EVALSHA"
        task = asyncio.create_task(second.run("m1", counted))
        await asyncio.wait_for(client.entered.wait(), 10)
        started = time.monotonic()
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=BOUND + 10)
        took = time.monotonic() - started
        cancelled = bool(done) and task.cancelled()
        if held is not None:
            held.cancel()
            await asyncio.gather(held, return_exceptions=True)
        else:
            # The claim was abandoned at once: the next delivery runs now, not after the
            # lease (60 s).
            async with asyncio.timeout(BOUND):
                assert await first.run("m1", counted) == "ran"
        await client.aclose()
        await other.aclose()
        return took, cancelled, runs

    took, cancelled, runs = asyncio.run(body())
    assert took < BOUND, f"{role}: the cancelled run went on for {took:.1f} s"
    assert cancelled, role
    assert runs == (1 if role == "claimant" else 0)  # only the next delivery's run
