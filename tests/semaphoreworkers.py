"""Code that runs in child processes of the semaphore tests (forked by forked.FORKSERVER).

Timestamps are time.monotonic_ns(), one clock for all processes on Linux, so intervals
from different processes can be compared in one ledger.
"""

from __future__ import annotations

import asyncio
import random
import time
from multiprocessing.connection import Connection
from typing import Any

from lockworkers import async_client, sync_client

import seawall
import seawall.aio

HOUR = 3600.0


def _start_together(start_at: float | None) -> None:
    """Wait for the common start (wall clock): pool processes that start one after another
    would otherwise run their rounds one after another and share nothing."""
    if start_at is not None:
        time.sleep(max(0.0, start_at - time.time()))


# How long a first hold waits for the other processes to hold too (see cycle_permits).
MEET_WAIT = 10.0


def cycle_permits(
    url: str,
    cluster: bool,
    world: str,
    name: str,
    value: int,
    cycles: int,
    start_at: float | None = None,
) -> list[tuple[int, int]]:
    """`cycles` acquire/hold/release rounds; returns (entered, left) ns of each hold.

    The first hold of each process lasts until `value` processes have held at once (or
    MEET_WAIT has passed): the permits are then surely shared, however late the machine
    starts one of the processes."""
    if world == "async":
        return asyncio.run(_cycle_async(url, cluster, name, value, cycles, start_at))
    r = sync_client(url, cluster)
    sem = seawall.Semaphore(r, name, value=value, ttl=5.0, timeout=30)
    r.ping()
    _start_together(start_at)
    ledger = []
    for cycle in range(cycles):
        with sem:
            entered = time.monotonic_ns()
            time.sleep(0.002)
            if cycle == 0:
                r.incr(f"meet:{name}")
                stop = time.monotonic() + MEET_WAIT
                while int(r.get(f"meet:{name}") or 0) < value and time.monotonic() < stop:
                    time.sleep(0.001)
            ledger.append((entered, time.monotonic_ns()))
    r.close()
    return ledger


async def _cycle_async(
    url: str, cluster: bool, name: str, value: int, cycles: int, start_at: float | None
) -> list[tuple[int, int]]:
    r = async_client(url, cluster)
    sem = seawall.aio.Semaphore(r, name, value=value, ttl=5.0, timeout=30)
    await r.ping()
    _start_together(start_at)
    ledger = []
    for cycle in range(cycles):
        async with sem:
            entered = time.monotonic_ns()
            await asyncio.sleep(0.002)
            if cycle == 0:  # see cycle_permits
                await r.incr(f"meet:{name}")
                stop = time.monotonic() + MEET_WAIT
                while int(await r.get(f"meet:{name}") or 0) < value:
                    if time.monotonic() >= stop:
                        break
                    await asyncio.sleep(0.001)
            ledger.append((entered, time.monotonic_ns()))
    await r.aclose()
    return ledger


def hold_permit(
    url: str, cluster: bool, world: str, name: str, value: int, ttl: float, pipe: Connection
) -> None:
    """Acquire one permit, report ("held", fence), then wait to be killed."""
    if world == "async":
        asyncio.run(_hold_async(url, cluster, name, value, ttl, pipe))
        return
    sem = seawall.Semaphore(sync_client(url, cluster), name, value=value, ttl=ttl)
    sem.acquire()
    pipe.send(("held", sem.fence))
    time.sleep(120)


async def _hold_async(
    url: str, cluster: bool, name: str, value: int, ttl: float, pipe: Connection
) -> None:
    sem = seawall.aio.Semaphore(async_client(url, cluster), name, value=value, ttl=ttl)
    await sem.acquire()
    pipe.send(("held", sem.fence))
    await asyncio.sleep(120)


def skew_wall_clock(hours: float) -> None:
    """Shift this process's wall clock (time.time) by `hours`: seawall must not care."""
    real_time, real_time_ns = time.time, time.time_ns
    offset = hours * HOUR
    time.time = lambda: real_time() + offset
    time.time_ns = lambda: real_time_ns() + int(offset * 1e9)


def fault_cycler(
    url: str,
    name: str,
    value: int,
    ttl: float,
    cycles: int,
    skew_hours: float,
    start: Any,
    pipe: Connection,
) -> None:
    """The churn of the fault test: `cycles` holds, each reported on `pipe` as it happens.

    ("enter", entered ns, token) right after acquire; ("exit", left ns) after release,
    where `left` is read just before release, truncated at the lease deadline when
    release found the lease lost (the process was paused past it); ("done", cycles done,
    permits lost) at the end.
    Each message is one small write on this process's own pipe, so a SIGKILL between
    messages loses nothing already sent and cannot leave a shared lock held.
    """
    if skew_hours:
        skew_wall_clock(skew_hours)
    r = sync_client(url, False)
    sem = seawall.Semaphore(r, name, value=value, ttl=ttl)
    rng = random.Random()
    lost = 0
    start.wait(60)
    for _ in range(cycles):
        if not sem.acquire(timeout=60):
            raise RuntimeError("no permit within 60 s")
        entered = time.monotonic_ns()
        hold = sem._current()  # this thread's newest hold
        assert hold is not None
        pipe.send(("enter", entered, hold.token))
        time.sleep(rng.uniform(0.0005, 0.003))
        # The hold ends when the holder stops acting under it: before it calls release (a
        # pause after the release script ran must not stretch the interval).
        left = time.monotonic_ns()
        try:
            sem.release()
        except seawall.LockNotOwnedError:
            # Paused past its lease: it cannot know when the server gave the permit away,
            # only that this was no earlier than its own deadline (sent + ttl of the last
            # successful renewal), so that is where its hold provably ended.
            left = min(left, int(hold.deadline * 1e9))
            lost += 1
        pipe.send(("exit", left))
    pipe.send(("done", cycles, lost))
    r.close()
