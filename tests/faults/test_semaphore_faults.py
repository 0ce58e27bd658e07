"""Semaphore under faults: holders killed and paused while 32 processes churn, one of them
with a wall clock hours off."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

from conftest import Target
from forked import FORKSERVER
from semaphoreworkers import fault_cycler

import seawall
from seawall.shared._keys import semaphore_keys


def peak_overlap(intervals: list[tuple[int, int]]) -> tuple[int, int]:
    """The most intervals open at one instant, and that instant (exits at t come first)."""
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    peak = inside = when = 0
    for at, step in events:
        inside += step
        if inside > peak:
            peak, when = inside, at
    return peak, when


@dataclass
class Worker:
    process: Any
    pipe: Connection
    open: tuple[int, str] | None = None  # (entered ns, token) of the hold in progress
    intervals: list[tuple[int, int]] = field(default_factory=list)
    done: tuple[int, int] | None = None  # (cycles, permits found lost at release)
    killed: bool = False
    stopped_until: float | None = None


@dataclass
class Fault:
    kind: str
    token: str
    at: float  # monotonic seconds
    returned_after: float | None = None  # when the server no longer counted its permit


def _lease_over(r: Any, key: str, token: str) -> bool:
    """Whether `token` no longer holds a permit by the server's clock."""
    with r.pipeline(transaction=True) as pipe:
        score, (seconds, micros) = pipe.zscore(key, token).time().execute()
    return score is None or score <= seconds * 1000 + micros // 1000


# How often the churn's parent reads the workers' pipes, and asks the server whether the
# permits of faulted holders have come back (bound: ttl + 1 s; they take about ttl).
READ_EVERY = 0.005
CHECK_EVERY = 0.02


# --- acceptance 5: the bound holds under SIGKILL, SIGSTOP and a skewed client clock ---------


def test_bound_holds_under_kills_pauses_and_a_skewed_clock(standalone: Target) -> None:
    value, ttl, processes, cycles = 3, 1.0, 32, 300
    kills, stops = 4, 6
    name = "churn"
    key = semaphore_keys(name).key
    r = standalone.sync()
    start = FORKSERVER.Event()
    workers: dict[int, Worker] = {}
    for index in range(processes):
        reader, writer = FORKSERVER.Pipe(duplex=False)
        # Worker 0's time.time() is 5 hours ahead; it must count like everyone else.
        skew = 5.0 if index == 0 else 0.0
        process = FORKSERVER.Process(
            target=fault_cycler,
            args=(standalone.url, name, value, ttl, cycles, skew, start, writer),
            daemon=True,
        )
        process.start()
        writer.close()
        workers[index] = Worker(process, reader)
    rng = random.Random(20261122)
    faults: list[Fault] = []
    wanted = {"kill": kills, "stop": stops}
    hits = {"kill": 0, "stop": 0}
    attempts, max_attempts, missed = 0, 20 * (kills + stops), 0
    try:
        start.set()
        started = time.monotonic()
        next_fault = started + 1.0
        next_check = started
        while any(w.done is None and not w.killed for w in workers.values()):
            assert time.monotonic() - started < 120, "the churn did not finish"
            # Read the pipes in batches: a wake-up per message (800 a second) cost this
            # process 4 CPU-seconds, taken from the workers on a 2-core machine. A batch
            # is at most READ_EVERY old, and every victim is checked before it counts.
            time.sleep(READ_EVERY)
            live = {w.pipe: w for w in workers.values() if not w.killed and w.done is None}
            for pipe in wait(list(live), timeout=0.02):
                _drain(live[pipe])  # type: ignore[index]
            now = time.monotonic()
            for worker in workers.values():
                if worker.stopped_until is not None and now >= worker.stopped_until:
                    _resume(worker)
                    worker.stopped_until = None
            if now >= next_check:  # a request to the server per pending fault
                next_check = now + CHECK_EVERY
                for fault in faults:
                    if fault.returned_after is None and _lease_over(r, key, fault.token):
                        fault.returned_after = now - fault.at
            # Alternate kills and stops until each has hit a holder as often as planned.
            turn = len(faults) % 2 == 0 or hits["stop"] == stops
            kind = "kill" if hits["kill"] < kills and turn else "stop"
            if hits[kind] < wanted[kind] and attempts < max_attempts and now >= next_fault:
                # Only a process known to hold a permit; worker 0 is spared from SIGKILL so
                # the skewed clock is seen through a whole run.
                holding = [
                    i
                    for i, w in workers.items()
                    if w.open
                    and not w.killed
                    and w.stopped_until is None
                    and not (kind == "kill" and i == 0)
                ]
                if holding:
                    attempts += 1
                    victim = workers[rng.choice(holding)]
                    assert victim.open is not None
                    _, token = victim.open
                    # Stop it first, then make sure it still held the permit: one that had
                    # just released is let go (and a SIGKILL spent on it would waste a
                    # process). A stopped process acts no more, so a kill dates from here.
                    os.kill(victim.process.pid, signal.SIGSTOP)
                    stopped_ns = time.monotonic_ns()
                    at = time.monotonic()
                    if _lease_over(r, key, token):
                        missed += 1
                        _resume(victim)
                        next_fault = at + 0.02
                        continue
                    hits[kind] += 1
                    faults.append(Fault(kind, token, at))
                    next_fault = at + 0.5
                    if kind == "stop":
                        victim.stopped_until = at + ttl + 0.3
                        continue
                    victim.process.kill()
                    victim.killed = True
                    _drain(victim)
                    if victim.open is not None:
                        victim.intervals.append((victim.open[0], stopped_ns))
        churned = time.monotonic() - started
        last_fault = max(f.at for f in faults)
        # Every faulted permit came back (by the server's clock) within ttl + 1 s.
        while any(f.returned_after is None for f in faults):
            now = time.monotonic()
            for fault in faults:
                if fault.returned_after is None and _lease_over(r, key, fault.token):
                    fault.returned_after = now - fault.at
            if now > last_fault + ttl + 3:
                break
            time.sleep(CHECK_EVERY)
    finally:
        for worker in workers.values():
            if worker.process.is_alive():
                os.kill(worker.process.pid, signal.SIGCONT)
                worker.process.kill()
            worker.process.join(5)

    intervals = [i for w in workers.values() for i in w.intervals]
    peak, peak_at = peak_overlap(intervals)
    at_peak = [
        (index, start, end)
        for index, w in workers.items()
        for start, end in w.intervals
        if start <= peak_at < end
    ]
    finished = [w for w in workers.values() if w.done is not None]
    lost = sum(w.done[1] for w in finished if w.done is not None)
    returns = sorted(f.returned_after or 99.0 for f in faults)
    print(
        f"\nsemaphore churn: {len(intervals)} holds by {processes} processes in {churned:.1f} s, "
        f"{len(faults)} faults on holders ({hits['kill']} SIGKILL, {hits['stop']} SIGSTOP; "
        f"{missed} more SIGSTOPs came just after a release and were undone), {lost} leases "
        f"lost by paused holders, peak {peak} holders, permits back after "
        + ", ".join(f"{s:.2f}" for s in returns)
        + " s"
    )
    assert len(faults) == kills + stops, "not every fault found a holder to hit"
    assert peak == value, at_peak  # never above the bound, and really contended
    assert max(returns) <= ttl + 1.0
    skewed = workers[0].done
    assert skewed is not None and skewed[0] == cycles, "the skewed clock's process did not finish"
    killed = sum(w.killed for w in workers.values())
    assert killed == kills and len(finished) == processes - kills
    assert all(w.done is not None and w.done[0] == cycles for w in finished)
    assert len(intervals) >= (processes - killed) * cycles
    assert lost >= 1  # the paused holders really were paused past their leases
    # Everything is back: all permits free, each taken at once by a fresh holder.
    fresh = [seawall.Semaphore(r, name, value=value, ttl=ttl) for _ in range(value)]
    assert all(sem.acquire(timeout=ttl + 1) for sem in fresh)
    assert fresh[0].holders() == value
    for sem in fresh:
        sem.release()
    assert fresh[0].available() == value


def _drain(worker: Worker) -> None:
    """Read every message `worker` has sent so far."""
    try:
        while worker.pipe.poll():
            message = worker.pipe.recv()
            if message[0] == "enter":
                worker.open = (message[1], message[2])
            elif message[0] == "exit":
                assert worker.open is not None
                worker.intervals.append((worker.open[0], message[1]))
                worker.open = None
            else:
                worker.done = (message[1], message[2])
    except EOFError:
        pass


def _resume(worker: Worker) -> None:
    """SIGCONT a stopped worker. One that had exited before the SIGSTOP reached it (its last
    hold just ended) is gone by now, reaped by the fork server: nothing to resume. Whether
    every worker finished its cycles is checked at the end."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(worker.process.pid, signal.SIGCONT)
