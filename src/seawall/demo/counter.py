"""Scenario: eight processes increment one shared counter with GET then SET.

The same workload runs three times: with no lock, with the seeds' "SETNX then EXPIRE"
lock (seed 003: SETNX, then EXPIRE as a second command, poll every 3 ms, release with a
plain DEL), and with `seawall.Lock`. A few increments stall between their GET and their
SET for longer than the lock's ttl, as a slow query or a long pause would. The seeds'
lock expires under the stalled holder, a second process takes it, and the first one's
late SET and DEL then undo the second one's work; seawall's lease is renewed while the
holder is alive, and only the owner's token can release it, so every increment counts.
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import redis

import seawall
from seawall.demo._table import Cell, Column, Table, seconds
from seawall.demo._workers import client

if TYPE_CHECKING:
    from seawall.demo._context import DemoContext

Method = Literal["none", "setnx", "seawall"]

# The seeds' EXPIRE takes whole seconds, so the smallest honest ttl is 1 s. A stall must
# outlast it by a margin the scheduler of a busy 2-core machine cannot eat.
TTL_SECONDS = 1
STALL_SECONDS = 1.3
# The seeds' polling interval: Thread.sleep(3, RANDOM.nextInt(500)).
POLL_SECONDS = 0.003
_ROUND_TIMEOUT = 90.0


@dataclass(frozen=True)
class Plan:
    increments: int  # per worker
    stalls: int  # in all, at evenly spread points of the counter's progress


FULL = Plan(increments=200, stalls=2)
QUICK = Plan(increments=100, stalls=1)


@dataclass(frozen=True)
class WorkerReport:
    """What one worker saw of its lock: the evidence behind each row's notes."""

    lock_gone: int = 0  # SETNX: at release our lock was gone (expired or DEL'd) or not ours
    freed_foreign: int = 0  # SETNX: the DEL removed another process's lock
    leases_lost: int = 0  # seawall.Lock: release raised LockNotOwnedError
    stalled: int = 0  # increments of this worker that stalled


def stall_points(expected: int, stalls: int) -> tuple[int, ...]:
    """Points of the work (in increments done) where one increment stalls, evenly spread."""
    return tuple(expected * point // (stalls + 2) for point in range(1, stalls + 1))


class _Incrementer:
    """One worker's read-modify-write, which stalls once the work passes a stall point.

    Progress is the larger of the value read and this worker's own count times the number
    of workers: the value alone never gets far without a lock (updates are lost), and the
    own count alone misleads under the polling lock, where one process runs long streaks
    while the others sleep, so a stall could come after everyone else had finished. Each
    point is claimed with SET NX, so exactly one increment stalls per point.
    """

    def __init__(
        self, r: redis.Redis, counter_key: str, stall_at: tuple[int, ...], workers: int
    ) -> None:
        self._r = r
        self._key = counter_key
        self._pending = list(stall_at)
        self._workers = workers
        self._done = 0
        self.stalled = 0

    def __call__(self) -> None:
        value = int(self._r.get(self._key) or 0)
        progress = max(value, self._done * self._workers)
        if self._pending and progress >= self._pending[0]:
            point = self._pending.pop(0)
            if self._r.set(f"{self._key}:stall:{point}", os.getpid(), nx=True):
                self.stalled += 1
                time.sleep(STALL_SECONDS)
        self._r.set(self._key, value + 1)
        self._done += 1


def count(
    url: str,
    method: Method,
    counter_key: str,
    lock_name: str,
    increments: int,
    stall_at: tuple[int, ...],
    workers: int,
) -> WorkerReport:
    """Worker task: `increments` read-modify-write increments of `counter_key`."""
    r = client(url)
    increment = _Incrementer(r, counter_key, stall_at, workers)
    if method == "none":
        for _ in range(increments):
            increment()
        report = WorkerReport()
    elif method == "setnx":
        report = _count_with_setnx(r, lock_name, increments, increment)
    else:
        report = _count_with_seawall(r, lock_name, increments, increment)
    return dataclasses.replace(report, stalled=increment.stalled)


def _count_with_setnx(
    r: redis.Redis, lock_name: str, increments: int, increment: _Incrementer
) -> WorkerReport:
    gone = foreign = 0
    for iteration in range(increments):
        # The recipe as the seed writes it; the value is only a stamp, it proves nothing.
        stamp = f"{os.getpid()}:{iteration}"
        # The unsafe recipe is the point of this scenario: seawall lint would flag it.
        while not r.setnx(lock_name, stamp):  # noqa: SW003
            time.sleep(POLL_SECONDS)
        r.expire(lock_name, TTL_SECONDS)
        increment()
        # The recipe releases with a plain DEL. Reading the key in the same transaction
        # changes nothing about that DEL; it only lets the table say whose lock it removed.
        release = r.pipeline(transaction=True)
        release.get(lock_name)
        release.delete(lock_name)  # noqa: SW005 - the recipe's plain DEL, on purpose
        found, _ = release.execute()
        if found is None or found.decode() != stamp:
            gone += 1
            foreign += found is not None
    return WorkerReport(lock_gone=gone, freed_foreign=foreign)


def _count_with_seawall(
    r: redis.Redis, lock_name: str, increments: int, increment: _Incrementer
) -> WorkerReport:
    lock = seawall.Lock(r, lock_name, ttl=float(TTL_SECONDS))
    lost = 0
    for _ in range(increments):
        lock.acquire()
        try:
            increment()
        finally:
            try:
                lock.release()
            except seawall.LockNotOwnedError:
                lost += 1
    return WorkerReport(leases_lost=lost)


def run(ctx: DemoContext) -> Table:
    """Run the three rounds and tabulate them."""
    plan = QUICK if ctx.quick else FULL
    workers = len(ctx.workers)
    expected = workers * plan.increments
    stall_at = stall_points(expected, plan.stalls)
    table = Table(
        title=f"A shared counter: read-modify-write from {workers} processes",
        columns=[
            Column("method"),
            Column("expected", ">"),
            Column("final", ">"),
            Column("lost", ">"),
            Column("time", ">"),
            Column("notes", wrap=True),
        ],
        intro=[
            f"{workers} processes x {plan.increments} increments of one counter, each a GET "
            f"then a SET of value+1; lock ttl {TTL_SECONDS} s. In every round "
            f"{_times(len(stall_at), 'increment')} (after {_listing(stall_at)} of the "
            f"{expected}) {'stalls' if len(stall_at) == 1 else 'stall'} {STALL_SECONDS} s "
            "between GET and SET, as a slow query or a slow HTTP call would.",
        ],
    )
    for method, label in (
        ("none", "no lock"),
        ("setnx", "SETNX+EXPIRE"),
        ("seawall", "seawall.Lock"),
    ):
        ctx.progress(f"counter: {label} ({expected} increments)")
        counter_key = ctx.name(f"counter:{method}")
        lock_name = ctx.name(f"counter-lock:{method}")
        ctx.client.set(counter_key, 0)
        started = time.monotonic()
        reports: list[WorkerReport] = ctx.workers.run_all(
            count,
            [(ctx.url, method, counter_key, lock_name, plan.increments, stall_at, workers)]
            * workers,
            timeout=_ROUND_TIMEOUT,
        )
        elapsed = time.monotonic() - started
        final = int(ctx.client.get(counter_key) or 0)
        lost = expected - final
        table.add(
            label,
            str(expected),
            str(final),
            Cell(str(lost), "bad" if lost else "good"),
            seconds(elapsed),
            _notes(method, reports),
        )
    table.notes = [
        "lost = expected - final: increments that some process made and another "
        "overwrote. time: seawall.Lock waits out each stall, as a lock must; the "
        f"SETNX lock stops protecting after its {TTL_SECONDS} s ttl.",
        "SETNX+EXPIRE is seed 003's lock. Besides what it lost above: it has no owner check "
        "(DEL frees whoever holds it now), a crash between SETNX and EXPIRE leaves a lock "
        "that never expires, and waiters poll every 3 ms instead of being woken.",
    ]
    return table


def _notes(method: str, reports: list[WorkerReport]) -> str:
    stalled = sum(report.stalled for report in reports)
    if method == "none":
        return (
            "GETs and SETs of different processes interleave; each stalled SET also "
            "wipes out everything written during its stall"
        )
    if method == "setnx":
        gone = sum(report.lock_gone for report in reports)
        foreign = sum(report.freed_foreign for report in reports)
        return (
            f"the lock expired under {_times(stalled, 'stalled holder')}; then "
            f"{_times(foreign, 'DEL')} removed another process's lock, and "
            f"{_times(gone, 'holder')} no longer held the lock they were releasing"
        )
    lost = sum(report.leases_lost for report in reports)
    return (
        f"the lease was renewed through {_times(stalled, 'stall')}; only the owner's "
        f"token releases it; waiters are woken, not polled; leases lost: {lost}"
    )


def _listing(values: tuple[int, ...]) -> str:
    words = [str(value) for value in values]
    return " and ".join([", ".join(words[:-1]), words[-1]] if len(words) > 2 else words)


def _times(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"
