"""seawall.RWLock and seawall.aio.RWLock against one server and the 3+3 cluster.

Each test body is written once against an awaitable facade: every side object gets an
owner of its own (holds are per owner), a task in the "async" world and a thread in the
"sync" world, which runs that object's calls; both implementations go through the same steps.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from conftest import Target
from owners import OwnerPerObject

import seawall
import seawall.aio
from seawall.locks._async.renewer import get_renewer as get_async_renewer
from seawall.locks._rwpolicy import READER_QUEUE_TTL
from seawall.locks._sync.renewer import get_renewer


class World:
    """Builds RWLocks of one world and calls their methods as awaitables."""

    def __init__(self, target: Target, world: str) -> None:
        self.target = target
        self.world = world
        self.admin = target.sync()
        self._aclients: list[Any] = []
        self._owners = OwnerPerObject(world)

    def rwlock(self, name: str, **kwargs: Any) -> Any:
        if self.world == "sync":
            return seawall.RWLock(self.target.sync(), name, **kwargs)
        client = self.target.aio()
        self._aclients.append(client)
        return seawall.aio.RWLock(client, name, **kwargs)

    async def __call__(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call a side's method in that side's owner."""
        return await self._owners.call(method, *args, **kwargs)

    async def fence(self, side: Any) -> int:
        """The side's fence, read by its owner."""
        return await self._owners.fence(side)

    def renewing(self) -> int:
        return get_async_renewer().active() if self.world == "async" else get_renewer().active()

    async def close(self) -> None:
        await self._owners.close()
        for client in self._aclients:
            await client.aclose()


def play(target: Target, world: str, body: Callable[[World], Awaitable[None]]) -> None:
    async def main() -> None:
        env = World(target, world)
        try:
            await body(env)
        finally:
            await env.close()

    asyncio.run(main())


async def until(condition: Callable[[], bool], seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.005)


def leftovers(target: Target) -> list[str]:
    return target.lock_keys()  # fence counter and released tokens aside (both expire)


# --- many readers or one writer ------------------------------------------------------------


def test_readers_share_and_writers_exclude(target: Target, world: str) -> None:
    async def body(env: World) -> None:
        rw = env.rwlock("doc", ttl=5.0)
        r1, r2, w1, w2 = rw.read(), rw.read(), rw.write(), rw.write()
        assert await env(r1.acquire, blocking=False)
        assert await env(r2.acquire, blocking=False)  # readers share
        assert env.admin.zcard(rw.keys.readers) == 2  # each reader holds its own lease
        assert await env(w1.acquire, blocking=False) is False
        assert await env(w1.acquire, timeout=0.2) is False
        await env(r1.release)
        assert await env(w1.acquire, blocking=False) is False  # r2 still reads
        await env(r2.release)
        assert await env(w1.acquire, blocking=False)
        first_fence = await env.fence(w1)
        assert await env(w1.owned)
        assert await env(r1.acquire, blocking=False) is False
        assert await env(w2.acquire, blocking=False) is False
        await env(w1.release)
        assert await env(w2.acquire, blocking=False)
        assert await env.fence(w2) == first_fence + 1
        await env(w2.release)
        assert leftovers(env.target) == []

    play(target, world, body)


def test_context_manager_and_timeout(target: Target, world: str) -> None:
    async def body(env: World) -> None:
        rw = env.rwlock("cm", ttl=5.0, timeout=0.1)
        # The holds that must succeed go through an object with a patient timeout: a first
        # try on a new Cluster client (slots, script load) can take 0.1 s on a busy machine.
        patient = env.rwlock("cm", ttl=5.0, timeout=5.0)
        blocker = patient.write()
        assert await env(blocker.acquire)
        if env.world == "async":
            with pytest.raises(seawall.LockTimeout, match="'cm'"):
                async with rw.read():
                    pass
        else:

            def enter() -> None:
                with rw.read():
                    pass

            with pytest.raises(seawall.LockTimeout, match="'cm'"):
                await asyncio.to_thread(enter)
        await env(blocker.release)
        if env.world == "async":
            async with patient.read() as reader:
                assert await reader.owned()
            async with patient.write() as writer:
                assert writer.fence == await env.fence(blocker) + 1
        else:

            def both() -> int:
                with patient.read() as reader:
                    assert reader.owned()
                with patient.write() as writer:
                    return int(writer.fence)

            assert await asyncio.to_thread(both) == await env.fence(blocker) + 1
        # The reader that timed out leaves the queue with one bounded look (LAST_LOOK); on
        # a loaded machine that look can go unanswered in time, and its queue entry (and
        # the admission the writer's release then gave it) lapse by themselves. Nothing
        # that holds the lock may be left.
        queued = (":waiters", ":admitted")
        assert [k for k in leftovers(env.target) if not k.endswith(queued)] == []
        await until(lambda: leftovers(env.target) == [], READER_QUEUE_TTL + 5.0)

    play(target, world, body)


# --- writer preference, and no reader starvation -----------------------------------------


def test_waiting_writer_holds_new_readers_back(target: Target, world: str) -> None:
    async def body(env: World) -> None:
        rw = env.rwlock("pref", ttl=5.0)
        first, late, writer = rw.read(), rw.read(), rw.write()
        assert await env(first.acquire)
        writing = asyncio.create_task(env(writer.acquire, timeout=10))
        await until(lambda: env.admin.zcard(rw.keys.writers_waiting) == 1)
        # A stream of new readers would starve the writer: they queue behind it instead.
        assert await env(late.acquire, blocking=False) is False
        reading = asyncio.create_task(env(late.acquire, timeout=10))
        await asyncio.sleep(0.2)
        assert not reading.done() and not writing.done()
        released_at = time.monotonic()
        await env(first.release)
        assert await writing
        woke_after = time.monotonic() - released_at
        assert not reading.done()
        # The reader that queued while the writer waited is let in when the writer leaves,
        # ahead of any writer waiting then (so readers do not starve either).
        second_writer = rw.write()
        writing_again = asyncio.create_task(env(second_writer.acquire, timeout=10))
        await until(lambda: env.admin.zcard(rw.keys.writers_waiting) == 1)
        await env(writer.release)
        assert await reading
        assert not writing_again.done()
        await env(late.release)
        assert await writing_again
        await env(second_writer.release)
        # Woken by the release, not by a timed re-check (those come after 1.6 s or more).
        assert woke_after < 1.0
        assert leftovers(env.target) == []

    play(target, world, body)


# --- only the holder releases; a dead holder is freed within its ttl -----------------------


def test_non_holder_release_raises_and_lapsed_holders_free_the_lock(
    target: Target, world: str
) -> None:
    async def body(env: World) -> None:
        ttl = 0.3
        rw = env.rwlock("lapse", ttl=ttl, renew=False)  # no renewal: as if the holder died
        survivor = env.rwlock("lapse", ttl=5.0)
        reader, writer = rw.read(), rw.write()
        for side in (reader, writer):
            with pytest.raises(seawall.LockNotOwnedError, match="'lapse'"):
                await env(side.release)
            with pytest.raises(seawall.LockNotOwnedError, match="'lapse'"):
                await env(side.extend)

        assert await env(reader.acquire)
        other = survivor.write()
        started = time.monotonic()
        assert await env(other.acquire, timeout=ttl + 2)
        assert time.monotonic() - started <= ttl + 0.5
        assert not await env(reader.owned)
        with pytest.raises(seawall.LockNotOwnedError, match="lease was lost"):
            await env(reader.release)
        await env(other.release)

        assert await env(writer.acquire)
        late = survivor.read()
        started = time.monotonic()
        assert await env(late.acquire, timeout=ttl + 2)
        assert time.monotonic() - started <= ttl + 0.5
        with pytest.raises(seawall.LockNotOwnedError, match="'lapse'"):
            await env(writer.extend)
        with pytest.raises(seawall.LockNotOwnedError, match="'lapse'"):
            await env(writer.release)
        # A lapsed reader cannot release (or renew) the lease of a live one either.
        assert await env(reader.acquire)
        await asyncio.sleep(ttl + 0.1)
        with pytest.raises(seawall.LockNotOwnedError):
            await env(reader.release)
        assert await env(late.owned)
        await env(late.release)
        assert leftovers(env.target) == []

    play(target, world, body)


# --- renewal; cycles leave nothing behind --------------------------------------------------


# Leases of a fraction of a second, renewed at a third of that: a latency bound, measured
# alone after the parallel part (`scripts/dev.py test`), as the other serial tests are.
@pytest.mark.serial
def test_renewal_keeps_both_sides_and_cycles_leave_nothing(target: Target, world: str) -> None:
    async def body(env: World) -> None:
        ttl = 0.4
        rw = env.rwlock("renewed", ttl=ttl)
        rival = env.rwlock("renewed", ttl=ttl)
        lost: list[Any] = []
        holder_rw = env.rwlock("renewed", ttl=ttl, on_lost=lost.append)
        for side, rival_side in (
            (holder_rw.read(), rival.write()),
            (holder_rw.write(), rival.read()),
        ):
            assert await env(side.acquire)
            stolen = 0
            ends = time.monotonic() + 2 * ttl  # without renewal the lease lapses at ttl
            while time.monotonic() < ends:
                if await env(rival_side.acquire, blocking=False):
                    stolen += 1
                    await env(rival_side.release)
                await asyncio.sleep(0.05)
            assert stolen == 0
            assert await env(side.owned)
            await env(side.release)
        assert lost == []
        for _ in range(100):
            for side in (rw.read(), rw.write()):
                await env(side.acquire)
                await env(side.release)
        assert env.renewing() == 0
        assert leftovers(env.target) == []

    play(target, world, body)


# --- a cancelled waiter leaves no intent behind ---------------------------------------------


def test_cancelled_writer_withdraws_its_intent(standalone: Target) -> None:
    admin = standalone.sync()

    async def body() -> None:
        r = standalone.aio()
        rw = seawall.aio.RWLock(r, "cancel", ttl=5.0)
        first = rw.read()
        assert await first.acquire()
        waiting = asyncio.create_task(rw.write().acquire())
        await until(lambda: admin.zcard(rw.keys.writers_waiting) == 1)
        waiting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiting
        # Withdrawn at once, not when the intent would lapse (5 s).
        await until(lambda: admin.zcard(rw.keys.writers_waiting) == 0, seconds=1.0)
        late = rw.read()
        assert await late.acquire(blocking=False)
        await late.release()
        await first.release()
        await r.aclose()

    asyncio.run(body())
    assert leftovers(standalone) == []


# --- a lease lost while held is reported -------------------------------------------------


def test_lost_lease_fires_on_lost_and_release_raises(standalone: Target, world: str) -> None:
    async def body(env: World) -> None:
        lost: list[Any] = []
        rw = env.rwlock("lost", ttl=0.3, on_lost=lost.append)
        for side, key in ((rw.read(), rw.keys.readers), (rw.write(), rw.keys.writer)):
            assert await env(side.acquire)
            env.admin.delete(key)  # the lease is gone (as after a failover to a stale replica)
            await until(lambda side=side: side in lost, seconds=3.0)
            assert not await env(side.owned)
            with pytest.raises(seawall.LockNotOwnedError, match="'lost'"):
                await env(side.release)
        assert len(lost) == 2
        assert env.renewing() == 0

    play(standalone, world, body)
