"""Scenario: a lock holder frozen past its lease, whose late write is refused by its fence.

No lock can stop this on its own: process A holds `seawall.Lock`, then the whole process is
frozen (SIGSTOP here; a stop-the-world GC pause, a VM migration or swapping in real life),
so not even its renewal thread runs. The lease lapses, B takes the lock with a larger fence
and writes. When A wakes up it still believes it holds the lock. Its write goes through
`seawall.fenced_write` with its old fence, and the store refuses it; its `release()` raises
`LockNotOwnedError`. A re-reads and retries under a new hold, and no update is lost.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import seawall
from seawall.demo._table import Cell, Column, Table
from seawall.demo._workers import client

if TYPE_CHECKING:
    from seawall.demo._context import DemoContext

TTL = 1.0
PAUSE = 1.5  # how long A stays frozen: well past its lease
OPENING_BALANCE = 100
DEPOSIT = 50  # B's update
WITHDRAWAL = 30  # A's update
_ACQUIRE_TIMEOUT = 10.0
_STEP_TIMEOUT = 30.0

# Held locks of this worker process between two steps of a scenario, by lock name.
_holds: dict[str, seawall.Lock] = {}


@dataclass(frozen=True)
class Update:
    """One read-modify-write of the account under a fresh hold, as a worker saw it."""

    asked: float  # wall clock: task started
    acquired: float  # wall clock: lock taken
    fence: int
    read: int
    wrote: int
    accepted: bool


@dataclass(frozen=True)
class LateWrite:
    at: float
    fence: int
    accepted: bool
    release: str  # "released" or the exception's name


def hold_and_read(url: str, lock_name: str, account: str) -> tuple[float, int, int]:
    """Worker task (A, step 1): take the lock, read the balance, keep holding it."""
    r = client(url)
    lock = seawall.Lock(r, lock_name, ttl=TTL)
    if not lock.acquire(timeout=_ACQUIRE_TIMEOUT):
        raise seawall.LockTimeout(f"lock {lock_name!r} not acquired", lock_name=lock_name)
    _holds[lock_name] = lock
    value, _ = seawall.fenced_read(r, account)
    return time.time(), lock.fence, int(value)


def write_late(url: str, lock_name: str, account: str, value: int) -> LateWrite:
    """Worker task (A, step 2, after the pause): write with the old fence, then release."""
    r = client(url)
    lock = _holds.pop(lock_name)
    at = time.time()
    accepted = seawall.fenced_write(r, account, value, fence=lock.fence)
    try:
        lock.release()
        outcome = "released"
    except seawall.LockNotOwnedError as exc:
        outcome = type(exc).__name__
    return LateWrite(at=at, fence=lock.fence, accepted=accepted, release=outcome)


def update(url: str, lock_name: str, account: str, delta: int) -> Update:
    """Worker task: add `delta` to the balance under the lock, through a fenced write."""
    r = client(url)
    asked = time.time()
    with seawall.Lock(r, lock_name, ttl=TTL, timeout=_ACQUIRE_TIMEOUT) as lock:
        acquired = time.time()
        value, _ = seawall.fenced_read(r, account)
        read = int(value)
        accepted = seawall.fenced_write(r, account, read + delta, fence=lock.fence)
    return Update(asked, acquired, lock.fence, read, read + delta, accepted)


def run(ctx: DemoContext) -> Table:
    """Freeze a holder past its lease and show its late write being refused."""
    table = Table(
        title="A holder frozen past its lease: the fence refuses its late write",
        columns=[
            Column("time", ">"),
            Column("who"),
            Column("step", wrap=True),
            Column("fence", ">"),
            Column("result"),
        ],
        intro=[
            f"seawall.Lock(r, name, ttl={TTL}); the balance is written only through "
            "seawall.fenced_write(r, key, value, fence=lock.fence). A withdraws "
            f"{WITHDRAWAL}, B deposits {DEPOSIT}; A's process is frozen while it holds "
            "the lock.",
        ],
    )
    if not hasattr(signal, "SIGSTOP"):
        table.notes = ["Skipped: freezing a process needs SIGSTOP, which this OS lacks."]
        return table
    ctx.progress("fencing: freezing a lock holder past its lease")
    lock_name, account = ctx.name("account-lock"), ctx.name("account")
    t0 = time.time()

    def add(at: float, who: str, step: str, fence: int | str, result: str | Cell) -> None:
        table.add(f"{at - t0:.2f} s", who, step, str(fence), result)

    with seawall.Lock(ctx.client, lock_name, ttl=TTL) as opening:
        seawall.fenced_write(ctx.client, account, OPENING_BALANCE, fence=opening.fence)
    add(
        time.time(),
        "setup",
        f"opens the account with balance {OPENING_BALANCE}",
        opening.fence,
        "written",
    )

    a_pid, b_pid = ctx.workers.pid(0), ctx.workers.pid(1)
    a, b = f"A {a_pid}", f"B {b_pid}"
    ctx.workers.submit(0, hold_and_read, ctx.url, lock_name, account)
    at, a_fence, a_read = ctx.workers.result(0, _STEP_TIMEOUT)
    add(at, a, f"acquires the lock and reads balance {a_read}", a_fence, "holds the lock")

    os.kill(a_pid, signal.SIGSTOP)
    frozen_at = time.time()
    try:
        add(
            frozen_at,
            a,
            "is frozen (SIGSTOP) before it writes; its lease renewal stops too",
            a_fence,
            "",
        )
        ctx.workers.submit(1, update, ctx.url, lock_name, account, DEPOSIT)
        b_update: Update = ctx.workers.result(1, _STEP_TIMEOUT)
        # B got in as soon as the lease lapsed; keep A frozen a while longer, so the pause
        # is plainly longer than the lease and not a photo finish.
        time.sleep(max(0.0, frozen_at + PAUSE - time.time()))
    finally:
        os.kill(a_pid, signal.SIGCONT)
    resumed_at = time.time()
    add(
        b_update.acquired,
        b,
        f"acquires the lock once A's lease lapsed (waited "
        f"{b_update.acquired - b_update.asked:.2f} s)",
        b_update.fence,
        "holds the lock",
    )
    add(
        b_update.acquired,
        b,
        f"reads {b_update.read}, fenced_write {b_update.wrote}, release()",
        b_update.fence,
        _verdict(b_update.accepted),
    )
    add(
        resumed_at,
        a,
        f"resumed (SIGCONT) after {resumed_at - frozen_at:.2f} s, past its "
        f"{TTL:.0f} s lease; still thinks it holds the lock",
        a_fence,
        "",
    )

    a_value = a_read - WITHDRAWAL
    ctx.workers.submit(0, write_late, ctx.url, lock_name, account, a_value)
    late: LateWrite = ctx.workers.result(0, _STEP_TIMEOUT)
    add(
        late.at,
        a,
        f"fenced_write {a_value} with its old fence",
        late.fence,
        _verdict(late.accepted, should_be=False),
    )
    add(
        late.at,
        a,
        "release()",
        late.fence,
        Cell(late.release, "good" if late.release != "released" else "bad"),
    )

    ctx.workers.submit(0, update, ctx.url, lock_name, account, -WITHDRAWAL)
    retry: Update = ctx.workers.result(0, _STEP_TIMEOUT)
    add(
        retry.acquired,
        a,
        f"retries: acquires, reads {retry.read}, fenced_write {retry.wrote}, release()",
        retry.fence,
        _verdict(retry.accepted),
    )

    balance, fence = seawall.fenced_read(ctx.client, account)
    expected = OPENING_BALANCE + DEPOSIT - WITHDRAWAL
    table.notes = [
        f"Final balance {int(balance)} (fence {fence}); expected {OPENING_BALANCE} + "
        f"{DEPOSIT} - {WITHDRAWAL} = {expected}. Without the fence, A's late write would "
        f"have set {a_value} and B's deposit would be gone.",
        "The same rule in SQL: keep the fence in the row, and let the database refuse "
        "an older one (0 rows updated: re-read and retry, as A did):",
        "  UPDATE accounts SET balance = :balance, fence = :fence",
        "   WHERE id = :id AND fence < :fence",
    ]
    return table


def _verdict(accepted: bool, *, should_be: bool = True) -> Cell:
    """The write's outcome, green when it is the outcome that keeps the data right."""
    text = "accepted" if accepted else "rejected (False)"
    return Cell(text, "good" if accepted == should_be else "bad")
