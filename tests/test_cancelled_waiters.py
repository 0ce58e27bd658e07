"""A cancelled waiter stops: asyncio's task.cancel() ends a blocked call every time.

redis-py's asyncio client can swallow a cancellation that lands while it reads a reply
(the call then returns normally). A waiter that carried on would try again for ever (one
such hang took 9 minutes in a parallel run); seawall looks after each reply, before each
wait and before each loader or handler call, whether its task was asked to stop. 100
cancellations at random moments of each waiting path (the locks' acquires, the cache's
reads, the Django backend's lease waits, Idempotent's duplicates, OrderSink.run): every
one ends within a bound, and nothing is left held. Then each path once more with a client
that loses the cancel on purpose, at the one call where it would matter.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

import djangoworkers
import pytest
import redis.asyncio
from conftest import Target
from swallowing import SwallowingClient, cancelled_in

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
    if kind == "rlock":
        return seawall.aio.RLock(client, "cancel", ttl=30), seawall.aio.RLock(client, "cancel")
    rw = seawall.aio.RWLock(client, "cancel", ttl=30)
    return (rw.read(), rw.write()) if kind == "write" else (rw.write(), rw.read())


async def cancelled_at_random(
    start: Callable[[int], Awaitable[Any]],
    rng: random.Random,
    after: Callable[[int], Awaitable[None]] | None = None,
) -> list[int]:
    """ROUNDS tasks of `start(n)`, each cancelled at a random moment of its first 20 ms;
    `after(n)` once the task ended cancelled. The rounds whose task went on past BOUND."""
    late: list[int] = []
    for n in range(ROUNDS):
        task = asyncio.create_task(start(n))
        await asyncio.sleep(rng.uniform(0.0, 0.02))
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=BOUND)
        if not done:
            late.append(n)
            task.cancel()
            await asyncio.wait({task}, timeout=BOUND)
            continue
        assert task.cancelled(), f"round {n}: the task ended with {task!r}"
        if after is not None:
            await after(n)
    return late


@pytest.mark.parametrize("kind", ["lock", "rlock", "semaphore", "write", "read"])
def test_every_cancelled_acquire_ends(standalone: Target, kind: str) -> None:
    rng = random.Random(7)

    async def body() -> list[int]:
        client = standalone.aio()
        holder, waiter = waiter_of(kind, client)
        assert await holder.acquire()
        try:
            late = await cancelled_at_random(lambda _: waiter.acquire(), rng)
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
def test_every_cancelled_cache_read_ends(standalone: Target, role: str) -> None:
    """100 get_or_load calls cancelled at random moments: a waiter (another cache holds the
    key's load lease for the whole test), or a loader (its loader never returns). Each
    ends within the bound, cancelled; a cancelled loader's lease goes back, so another
    cache loads the key at once."""
    rng = random.Random(11)

    async def body() -> list[int]:
        holder_client, reader_client = standalone.aio(), standalone.aio()
        holder = seawall.aio.Cache(holder_client, "cancel-read", ttl=60, lease=60)
        reader = seawall.aio.Cache(reader_client, "cancel-read", ttl=60, lease=60)
        loading, never = asyncio.Event(), asyncio.Event()

        async def stuck() -> str:
            loading.set()
            await never.wait()
            return "never"

        held = None
        if role == "waiter":
            held = asyncio.create_task(holder.get_or_load("held", stuck))
            await asyncio.wait_for(loading.wait(), 10)

        def key(n: int) -> str:
            return "held" if role == "waiter" else f"free-{n}"

        async def loaded_elsewhere(n: int) -> None:
            async with asyncio.timeout(BOUND):  # not the lease's 60 s
                assert await holder.get_or_load(key(n), lambda: "v") == "v"

        try:
            late = await cancelled_at_random(
                lambda n: reader.get_or_load(key(n), stuck),
                rng,
                loaded_elsewhere if role == "loader" else None,
            )
        finally:
            if held is not None:
                held.cancel()
                await asyncio.gather(held, return_exceptions=True)
            await holder_client.aclose()
            await reader_client.aclose()
        return late

    late = asyncio.run(body())
    assert late == [], f"{role}: cancelled reads {late} of {ROUNDS} went on"


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
        took, cancelled = await cancelled_in(
            client, "EVALSHA", lambda: reader.get_or_load("k", counted), BOUND + 5
        )
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
        stock = seawall.aio.Stock(client, "sku:cancel")
        await stock.put(3)
        sink = seawall.aio.OrderSink(client, stock, str(tmp_path / "orders.db"))
        await sink.drain(timeout=10)  # the group made, nothing to save: run() now blocks
        took, cancelled = await cancelled_in(
            client, "XREADGROUP", lambda: sink.run(block=0.2), BOUND + 3
        )
        sink.close()
        await client.aclose()
        return took, cancelled

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
        took, cancelled = await cancelled_in(
            client, "EVALSHA", lambda: second.run("m1", counted), BOUND + 10
        )
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


@pytest.mark.parametrize("kind", ["idempotent", "claimant", "sink"])
def test_every_cancelled_duplicate_and_sink_run_ends(
    standalone: Target, kind: str, tmp_path: Any
) -> None:
    """100 cancels at random moments of an Idempotent duplicate waiting for the claimant
    (which runs for the whole test), of a claimant whose handler never returns (its claim
    must be given up at once: the next delivery runs it), or of OrderSink.run() with
    nothing to save."""
    rng = random.Random(13)

    async def body() -> list[int]:
        client, other = standalone.aio(), standalone.aio()
        stop = asyncio.Event()
        try:
            if kind == "claimant":
                claimant = seawall.aio.Idempotent(client, "cancel-claim", lease=60)
                next_delivery = seawall.aio.Idempotent(other, "cancel-claim", lease=60)

                async def delivered_again(n: int) -> None:
                    async with asyncio.timeout(BOUND):  # not the lease's 60 s
                        assert await next_delivery.run(f"m{n}", lambda: "ran") == "ran"

                return await cancelled_at_random(
                    lambda n: claimant.run(f"m{n}", stop.wait), rng, delivered_again
                )
            if kind == "idempotent":
                running = asyncio.Event()

                async def forever() -> None:
                    running.set()
                    await stop.wait()

                claimant = asyncio.create_task(
                    seawall.aio.Idempotent(other, "cancel-dup", lease=60).run("m", forever)
                )
                await asyncio.wait_for(running.wait(), 10)
                duplicate = seawall.aio.Idempotent(client, "cancel-dup", lease=60)
                late = await cancelled_at_random(lambda _: duplicate.run("m", forever), rng)
                stop.set()
                await claimant
                return late
            stock = seawall.aio.Stock(client, "sku:cancel-run")
            await stock.put(1)
            sink = seawall.aio.OrderSink(client, stock, str(tmp_path / "orders.db"))
            await sink.drain(timeout=10)
            try:
                return await cancelled_at_random(lambda _: sink.run(block=0.05), rng)
            finally:
                sink.close()
        finally:
            await client.aclose()
            await other.aclose()

    late = asyncio.run(body())
    assert late == [], f"{kind}: cancelled runs {late} of {ROUNDS} went on"


@pytest.mark.parametrize("call", ["aget_or_set", "aget_or_set loads", "abegin_load"])
def test_every_cancelled_django_wait_ends(standalone: Target, call: str) -> None:
    """100 cancels at random moments of seawall.django's asyncio waits for a lease another
    caller holds for the whole test (a callable, or a page being rendered), and of callers
    whose callable never returns (their lease must go back at once)."""
    djangoworkers.setup("redis://unused", "django.core.cache.backends.locmem.LocMemCache")
    from seawall.django import RedisCache

    holder = RedisCache(standalone.url, {"OPTIONS": {"lease": 60.0}})
    reader = RedisCache(standalone.url, {"OPTIONS": {"lease": 60.0}})
    rng = random.Random(17)

    async def body() -> list[int]:
        stop, running = asyncio.Event(), asyncio.Event()

        async def forever() -> str:
            running.set()
            await stop.wait()
            return "made"

        if call == "aget_or_set loads":

            async def made_elsewhere(n: int) -> None:
                async with asyncio.timeout(BOUND):  # not the lease's 60 s
                    assert await holder.aget_or_set(f"v{n}", lambda: "made") == "made"

            return await cancelled_at_random(
                lambda n: reader.aget_or_set(f"v{n}", forever), rng, made_elsewhere
            )
        held = None
        if call == "abegin_load":
            assert await holder.abegin_load("page") is not None
        else:
            held = asyncio.create_task(holder.aget_or_set("value", forever))
            await asyncio.wait_for(running.wait(), 10)
        try:
            if call == "abegin_load":
                return await cancelled_at_random(lambda _: reader.abegin_load("page"), rng)
            return await cancelled_at_random(lambda _: reader.aget_or_set("value", forever), rng)
        finally:
            stop.set()
            if held is not None:
                await held

    late = asyncio.run(body())
    assert late == [], f"{call}: cancelled waits {late} of {ROUNDS} went on"


@pytest.mark.parametrize("api", ["cache", "django", "idempotent"])
def test_a_caller_cancelled_after_the_server_granted_its_lease_gives_it_back(
    seawall_url: str, api: str
) -> None:
    """Found by a fresh-clone run of the random rounds above: the cancel came after the
    server had run the script that elects the caller to load (or claim), before its reply
    was read. The caller never knew it held the lease, and the next caller waited for it
    (60 s here). Now the caller gives back whatever its token may hold."""
    djangoworkers.setup("redis://unused", "django.core.cache.backends.locmem.LocMemCache")
    from seawall.django import RedisCache

    async def body() -> tuple[float, bool, str]:
        other = redis.asyncio.Redis.from_url(seawall_url)
        client = SwallowingClient.from_url(seawall_url)
        client.late_reply = True
        never = asyncio.Event()

        async def stuck() -> str:
            await never.wait()
            return "never"

        if api == "cache":
            mine = seawall.aio.Cache(client, "granted", ttl=60, lease=60)
            theirs = seawall.aio.Cache(other, "granted", ttl=60, lease=60)
            # Its scripts loaded by SHA first: the armed call must be the real script.
            assert await mine.get_or_load("warm", lambda: "w") == "w"
            start: Any = lambda: mine.get_or_load("k", stuck)  # noqa: E731
            after: Any = lambda: theirs.get_or_load("k", lambda: "next")  # noqa: E731
        elif api == "django":
            mine_django = RedisCache(seawall_url, {"OPTIONS": {"lease": 60.0}})
            theirs_django = RedisCache(seawall_url, {"OPTIONS": {"lease": 60.0}})
            mine_django._astore().client = client
            assert await mine_django.aget_or_set("warm", lambda: "w") == "w"
            start = lambda: mine_django.aget_or_set("k", stuck)  # noqa: E731
            after = lambda: theirs_django.aget_or_set("k", lambda: "next")  # noqa: E731
        else:
            mine_once = seawall.aio.Idempotent(client, "granted", lease=60)
            theirs_once = seawall.aio.Idempotent(other, "granted", lease=60)
            assert await mine_once.run("warm", lambda: "w") == "w"
            start = lambda: mine_once.run("m", stuck)  # noqa: E731
            after = lambda: theirs_once.run("m", lambda: "next")  # noqa: E731
        took, cancelled = await cancelled_in(client, "EVALSHA", start, BOUND + 5)
        began = time.monotonic()
        try:
            async with asyncio.timeout(BOUND + 5):
                answer = await after()
        finally:
            waited = time.monotonic() - began
            await client.aclose()
            await other.aclose()
        assert took < BOUND
        return waited, cancelled, answer

    waited, cancelled, answer = asyncio.run(body())
    assert cancelled
    assert answer == "next"
    assert waited < BOUND, f"{api}: the next caller waited {waited:.1f} s for a lease nobody held"
