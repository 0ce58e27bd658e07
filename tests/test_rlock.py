"""seawall.RLock and seawall.aio.RLock against real servers: one server and the 3+3 cluster."""

from __future__ import annotations

import asyncio
import itertools
import random
import threading
import time
from typing import Any

import pytest
import redis.connection
from conftest import SPAWN, Target
from lockworkers import counter_key
from rlockworkers import count_under_rlock, reentered_holder

import seawall
import seawall.aio
from seawall.locks._async.renewer import get_renewer as get_async_renewer
from seawall.locks._sync.renewer import get_renewer


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def counts(values: list[bytes]) -> list[int]:
    return [int(v) for v in values]


# --- reentrancy: the counts are exact -------------------------------------------------------


def test_reentrancy_counts_exact(target: Target, world: str) -> None:
    r = target.sync()
    if world == "sync":
        lock = seawall.RLock(target.sync(), "re", ttl=5.0)
        for depth in (1, 2, 3):
            assert lock.acquire()
            assert counts(r.hvals(lock.holds_key)) == ([] if depth == 1 else [depth])
        fence = lock.fence
        lock.release()
        lock.release()
        assert lock.owned() and lock.locked()  # acquired 3 times, released twice: held
        assert r.exists(lock.holds_key) == 0  # held once: no count entry
        assert lock.acquire(timeout=0)  # re-entry never waits, whatever the timeout
        assert counts(r.hvals(lock.holds_key)) == [2]
        lock.release()
        assert lock.fence == fence  # one fence per outermost acquisition
        lock.release()
        assert not lock.locked() and not lock.owned()
        with pytest.raises(seawall.LockNotOwnedError, match="'re'"):
            lock.release()
        with lock:
            assert lock.fence == fence + 1
        assert target.lock_keys() == []
        return

    async def body() -> None:
        lock = seawall.aio.RLock(target.aio(), "re", ttl=5.0)
        for depth in (1, 2, 3):
            assert await lock.acquire()
            assert counts(r.hvals(lock.holds_key)) == ([] if depth == 1 else [depth])
        fence = lock.fence
        await lock.release()
        await lock.release()
        assert await lock.owned() and await lock.locked()
        assert r.exists(lock.holds_key) == 0
        assert await lock.acquire(timeout=0)
        assert counts(r.hvals(lock.holds_key)) == [2]
        await lock.release()
        assert lock.fence == fence
        await lock.release()
        assert not await lock.locked() and not await lock.owned()
        with pytest.raises(seawall.LockNotOwnedError, match="'re'"):
            await lock.release()
        async with lock:
            assert lock.fence == fence + 1

    run(body())
    assert target.lock_keys() == []


# --- mutual exclusion across processes, each hold entered twice -----------------------------


def test_mutual_exclusion_across_processes(target: Target, world: str) -> None:
    per_process, processes = 60, 2
    with SPAWN.Pool(processes) as pool:
        ledgers = pool.starmap(
            count_under_rlock,
            [(target.url, target.cluster, world, "rmx", per_process, 5.0)] * processes,
        )
    assert int(target.sync().get(counter_key("rmx"))) == per_process * processes
    intervals = sorted(interval for ledger in ledgers for interval in ledger)
    assert len(intervals) == per_process * processes
    overlaps = sum(1 for a, b in itertools.pairwise(intervals) if b[0] < a[1])
    assert overlaps == 0
    assert target.lock_keys() == []


# --- a re-entered holder killed with SIGKILL ------------------------------------------------


def test_reentered_holder_killed_lock_free_within_ttl(target: Target, world: str) -> None:
    ttl = 0.3
    parent_end, child_end = SPAWN.Pipe()
    child = SPAWN.Process(
        target=reentered_holder,
        args=(target.url, target.cluster, world, "rkilled", ttl, child_end),
    )
    child.start()
    try:
        assert parent_end.poll(30), "holder did not acquire"
        _, dead_fence = parent_end.recv()
        # The waiter's client is connected (on Cluster: its slot map read) before the kill,
        # so the time measured is the lock's, not a connection's set-up on a busy machine.
        if world == "sync":
            client = target.sync()
            client.ping()
            lock = seawall.RLock(client, "rkilled", ttl=5.0)
            child.kill()
            killed_at = time.monotonic()
            assert lock.acquire(timeout=ttl + 2)
            waited = time.monotonic() - killed_at
            fence = lock.fence
            lock.release()
        else:

            async def take() -> tuple[float, int | None]:
                client = target.aio()
                await client.ping()
                alock = seawall.aio.RLock(client, "rkilled", ttl=5.0)
                child.kill()
                killed_at = time.monotonic()
                assert await alock.acquire(timeout=ttl + 2)
                taken = time.monotonic() - killed_at, alock.fence
                await alock.release()
                await client.aclose()
                return taken

            waited, fence = run(take())
        assert fence is not None and fence > dead_fence
    finally:
        child.kill()
        child.join(5)
    assert waited <= ttl + 0.5
    # The dead holder's count went with its lease.
    assert target.lock_keys() == []


# --- a non-owner never touches the hold -----------------------------------------------------


def test_non_owner_cannot_release_or_extend(target: Target, world: str) -> None:
    r = target.sync()
    if world == "sync":
        lock = seawall.RLock(target.sync(), "rown", ttl=1.5, renew=False)
        other_process = seawall.RLock(target.sync(), "rown", ttl=10.0)
        lock.acquire()
        lock.acquire()
        seen: list[object] = []

        def other_thread() -> None:
            for action in (lock.release, lock.extend):
                try:
                    action()
                except seawall.LockNotOwnedError as exc:
                    seen.append(type(exc))
            seen.append(lock.acquire(blocking=False))
            seen.append(lock.owned())

        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join(10)
        assert seen == [seawall.LockNotOwnedError, seawall.LockNotOwnedError, False, False]
        assert counts(r.hvals(lock.holds_key)) == [2] and lock.owned()
        for action in (other_process.release, other_process.extend):
            with pytest.raises(seawall.LockNotOwnedError):
                action()
        # The lease lapses (no renewal); a new holder's lock is safe from the old owner.
        # (1.5 s: the checks before must fit in the lease, a cold cluster client included.)
        time.sleep(1.6)
        assert other_process.acquire(blocking=False)
        with pytest.raises(seawall.LockNotOwnedError, match="lost"):
            lock.release()  # the inner release finds the lease gone
        with pytest.raises(seawall.LockNotOwnedError):
            lock.acquire()  # so does a re-entry
        with pytest.raises(seawall.LockNotOwnedError):
            lock.extend(ttl=100)
        assert other_process.owned() and r.pttl(other_process.key) > 9000
        other_process.release()
        assert target.lock_keys() == []
        return

    async def body() -> None:
        lock = seawall.aio.RLock(target.aio(), "rown", ttl=1.5, renew=False)
        other_process = seawall.aio.RLock(target.aio(), "rown", ttl=10.0)
        await lock.acquire()
        await lock.acquire()

        async def other_task() -> list[object]:
            seen: list[object] = []
            for action in (lock.release, lock.extend):
                try:
                    await action()
                except seawall.LockNotOwnedError as exc:
                    seen.append(type(exc))
            seen.append(await lock.acquire(blocking=False))
            seen.append(await lock.owned())
            return seen

        seen = await asyncio.create_task(other_task())
        assert seen == [seawall.LockNotOwnedError, seawall.LockNotOwnedError, False, False]
        assert counts(r.hvals(lock.holds_key)) == [2] and await lock.owned()
        for action in (other_process.release, other_process.extend):
            with pytest.raises(seawall.LockNotOwnedError):
                await action()
        await asyncio.sleep(1.6)
        assert await other_process.acquire(blocking=False)
        with pytest.raises(seawall.LockNotOwnedError, match="lost"):
            await lock.release()
        with pytest.raises(seawall.LockNotOwnedError):
            await lock.acquire()
        with pytest.raises(seawall.LockNotOwnedError):
            await lock.extend(ttl=100)
        assert await other_process.owned() and r.pttl(other_process.key) > 9000
        await other_process.release()

    run(body())
    assert target.lock_keys() == []


# --- renewal keeps a re-entered hold; cycles leave nothing behind ---------------------------


# Leases of a fraction of a second, renewed at a third of that: a latency bound, measured
# alone after the parallel part (`scripts/dev.py test`), as the other serial tests are.
# A 0.2 s lease (renewed 133 ms before its end) was lost once in a fresh-clone run's
# serial phase on Cluster; 0.5 s leaves 333 ms for a renewal's round trip (the RWLock's
# renewal test leaves 267 ms, the Semaphore's 533, the Lock's 667).
@pytest.mark.serial
def test_renewal_keeps_a_reentered_hold_and_cycles_leave_nothing(
    target: Target, world: str
) -> None:
    ttl, hold_for, cycles = 0.5, 1.5, 50
    r = target.sync()
    if world == "sync":
        lock = seawall.RLock(target.sync(), "rrenew", ttl=ttl)
        other = seawall.RLock(target.sync(), "rrenew", ttl=ttl)
        lock.acquire()
        lock.acquire()
        stolen = 0
        until = time.monotonic() + hold_for
        while time.monotonic() < until:
            stolen += other.acquire(blocking=False)
            time.sleep(0.03)
        assert stolen == 0
        # The count lives as long as the lease it belongs to.
        assert counts(r.hvals(lock.holds_key)) == [2] and r.pttl(lock.holds_key) > 0
        lock.release()
        assert lock.owned()
        lock.release()
        for _ in range(cycles):
            with lock, lock:
                pass
        assert target.lock_keys() == []
        assert get_renewer().active() == 0
        return

    async def body() -> None:
        lock = seawall.aio.RLock(target.aio(), "rrenew", ttl=ttl)
        other = seawall.aio.RLock(target.aio(), "rrenew", ttl=ttl)
        await lock.acquire()
        await lock.acquire()
        stolen = 0
        until = time.monotonic() + hold_for
        while time.monotonic() < until:
            stolen += await other.acquire(blocking=False)
            await asyncio.sleep(0.03)
        assert stolen == 0
        assert counts(r.hvals(lock.holds_key)) == [2] and r.pttl(lock.holds_key) > 0
        await lock.release()
        assert await lock.owned()
        await lock.release()
        for _ in range(cycles):
            async with lock, lock:
                pass
        assert get_async_renewer().active() == 0

    run(body())
    assert target.lock_keys() == []


# --- acceptance 1: wrong-owner release in 10,000 interleavings ------------------------------

STEPS = 10_000


class Ledger:
    """What two owners of one RLock object did; checked after every step."""

    def __init__(self) -> None:
        self.holder: str | None = None  # which owner holds the lock, by the owners' account
        self.steps = 0
        self.refused = 0  # release/extend attempts by the owner that did not hold it
        self.refused_while_held = 0  # ... while the other owner held it
        self.count_checks = 0


def _step(depth: int, choice: float) -> str:
    """The next action of owner `me` holding the lock `depth` times."""
    if depth == 0:
        return "acquire" if choice < 0.3 else "release" if choice < 0.9 else "extend"
    if depth < 4 and choice < 0.45:
        return "acquire"
    return "check" if choice > 0.9 else "release"


def test_wrong_owner_release_raises_in_10000_thread_interleavings(standalone: Target) -> None:
    r = standalone.sync()
    lock = seawall.RLock(standalone.sync(), "inter", ttl=10.0)
    ledger = Ledger()
    mutex = threading.Lock()
    failures: list[str] = []

    def owner(me: str, seed: int) -> None:
        rng = random.Random(seed)
        depth = 0
        try:
            while True:
                with mutex:
                    if ledger.steps >= STEPS:
                        break
                    ledger.steps += 1
                    other_holds = ledger.holder not in (None, me)
                action = _step(depth, rng.random())
                if action == "acquire":
                    if lock.acquire(blocking=False):
                        with mutex:
                            assert ledger.holder in (None, me), "two owners at once"
                            ledger.holder = me
                        depth += 1
                elif action == "check":
                    expected = [] if depth == 1 else [depth]
                    assert counts(r.hvals(lock.holds_key)) == expected
                    with mutex:
                        ledger.count_checks += 1
                elif depth == 0:
                    try:
                        (lock.release if action == "release" else lock.extend)()
                    except seawall.LockNotOwnedError:
                        with mutex:
                            ledger.refused += 1
                            ledger.refused_while_held += other_holds
                    else:
                        raise AssertionError(f"{me} did an {action} of a lock it did not hold")
                else:
                    if depth == 1:
                        with mutex:
                            ledger.holder = None  # before the release, so no one sees two
                    lock.release()
                    depth -= 1
            while depth:
                if depth == 1:
                    with mutex:
                        ledger.holder = None
                lock.release()
                depth -= 1
        except BaseException as exc:
            failures.append(f"{me}: {exc!r}")
            raise

    threads = [threading.Thread(target=owner, args=(name, seed)) for seed, name in enumerate("ab")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert failures == []
    assert ledger.steps == STEPS
    assert ledger.refused_while_held >= 500, vars(ledger)
    assert ledger.count_checks >= 50, vars(ledger)
    assert not lock.locked()
    assert standalone.lock_keys() == []


def test_wrong_owner_release_raises_in_10000_task_interleavings(standalone: Target) -> None:
    r = standalone.sync()
    ledger = Ledger()

    async def body() -> None:
        client = standalone.aio()
        lock = seawall.aio.RLock(client, "inter", ttl=10.0)

        async def owner(me: str, seed: int) -> None:
            rng = random.Random(seed)
            depth = 0
            while ledger.steps < STEPS:
                ledger.steps += 1
                other_holds = ledger.holder not in (None, me)
                action = _step(depth, rng.random())
                if action == "acquire":
                    if await lock.acquire(blocking=False):
                        assert ledger.holder in (None, me), "two owners at once"
                        ledger.holder = me
                        depth += 1
                elif action == "check":
                    expected = [] if depth == 1 else [depth]
                    assert counts(await client.hvals(lock.holds_key)) == expected
                    ledger.count_checks += 1
                elif depth == 0:
                    try:
                        await (lock.release if action == "release" else lock.extend)()
                    except seawall.LockNotOwnedError:
                        ledger.refused += 1
                        ledger.refused_while_held += other_holds
                    else:
                        raise AssertionError(f"{me} did an {action} of a lock it did not hold")
                    await asyncio.sleep(0)  # a refusal costs no I/O: let the other run
                else:
                    if depth == 1:
                        ledger.holder = None
                    await lock.release()
                    depth -= 1
            while depth:
                if depth == 1:
                    ledger.holder = None
                await lock.release()
                depth -= 1

        await asyncio.gather(owner("a", 0), owner("b", 1))
        assert not await lock.locked()
        await client.aclose()

    run(body())
    assert ledger.steps == STEPS and ledger.holder is None
    assert ledger.refused_while_held >= 500, vars(ledger)
    assert ledger.count_checks >= 50, vars(ledger)
    assert r.exists("seawall:rlock:{inter}") == 0
    assert standalone.lock_keys() == []


# --- waiters are woken by the final release, not by an inner one ----------------------------


def test_waiter_woken_by_the_final_release_only(standalone: Target) -> None:
    holder = seawall.RLock(standalone.sync(), "rwake", ttl=30.0)
    holder.acquire()
    holder.acquire()
    got: list[float] = []

    def wait() -> None:
        waiter = seawall.RLock(standalone.sync(), "rwake", ttl=30.0)
        assert waiter.acquire(timeout=10)
        got.append(time.monotonic())
        waiter.release()

    thread = threading.Thread(target=wait)
    thread.start()
    time.sleep(0.3)  # the waiter is queued; the holder's key has ~30 s left
    holder.release()
    time.sleep(0.3)
    assert got == []  # an inner release frees nothing
    released_at = time.monotonic()
    holder.release()
    thread.join(10)
    assert got, "waiter never acquired"
    # Wait slices are 2 s: only a wake-up gets it here this fast.
    assert got[0] - released_at < 0.2


def test_reentry_costs_one_round_trip(standalone: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    lock = seawall.RLock(standalone.sync(), "rtrip", ttl=30.0, renew=False)
    lock.acquire()
    sent = 0
    send = redis.connection.AbstractConnection.send_packed_command
    caller = threading.get_ident()

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal sent
        # One request written, then its reply awaited: one round trip. Only this thread's:
        # a background thread an earlier test of this worker left (a listener's keep-alive
        # PING) may send meanwhile.
        sent += threading.get_ident() == caller
        return send(self, *args, **kwargs)

    monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counting)
    for _ in range(100):
        lock.acquire()
    for _ in range(100):
        lock.release()
    assert sent == 200
    monkeypatch.undo()
    lock.release()
