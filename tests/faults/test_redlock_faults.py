"""Redlock under faults: masters killed or frozen, clients paused mid-acquire, split votes."""

from __future__ import annotations

import asyncio
import collections
import itertools
import os
import random
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio
from forked import FORKSERVER
from redlockworkers import paused_client, share, split_voter, trial_worker

import seawall
import seawall.aio
from seawall.locks import _redlock
from seawall.shared import _fanout

# 0.2 s, not 0.1: under parallel workers on 2 loaded cores a healthy master's reply
# took over 0.1 s, so 3 of 5 up read as no majority. The bounds below scale with it.
NODE_TIMEOUT = 0.2
# An attempt is one concurrent round (<= NODE_TIMEOUT) plus, on failure, one concurrent
# release round (<= NODE_TIMEOUT); the rest is slack for this shared 2-core machine.
SLACK = 0.25
# Each acquire_in() makes new clients, so its first round also opens connections to five
# masters (three of them frozen): on a starved worker that took 1.3 s once (run beside two
# CPU burners). Still far from a hang: a frozen master with no socket timeout never answers.
COLD_CLIENTS = 1.0


def lock_keys(client: redis.Redis) -> list[bytes]:
    """Redlock keys on a master, other than fence counters (which persist by design)."""
    kept = (b":fence", b":released")  # outlive holds on purpose, but expire by themselves
    assert all(client.pttl(k) > 0 for k in client.keys("seawall:redlock:*") if k.endswith(kept))
    return [k for k in client.keys("seawall:redlock:*") if not k.endswith(kept)]


def acquire_in(world: str, urls: list[str], name: str, **kwargs: Any) -> tuple[bool, float, Any]:
    """(acquired, seconds taken, attempts) of one acquire(**kwargs) in `world`; released."""
    options = {"ttl": 2.0, "node_timeout": NODE_TIMEOUT, "retry_delay": 0.1}
    if world == "sync":
        # No socket_timeout: a frozen master would block a read forever.
        clients = [redis.Redis.from_url(url, socket_timeout=None) for url in urls]
        lock = seawall.Redlock(clients, name, **options)
        started = time.monotonic()
        taken = lock.acquire(**kwargs)
        took = time.monotonic() - started
        if taken:
            lock.release()
        return taken, took, lock.attempts

    async def body() -> tuple[bool, float, Any]:
        clients = [redis.asyncio.Redis.from_url(url, socket_timeout=None) for url in urls]
        lock = seawall.aio.Redlock(clients, name, **options)
        started = time.monotonic()
        taken = await lock.acquire(**kwargs)
        took = time.monotonic() - started
        if taken:
            await lock.release()
        for client in clients:
            await client.aclose()
        return taken, took, lock.attempts

    return asyncio.run(body())


# --- acceptance 2: a minority down is tolerated, a majority down fails fast and clean -------


@pytest.mark.parametrize("how", ["kill", "pause"])
def test_two_of_five_down_still_acquire_three_down_fail_fast(
    seawall_masters_factory: Any, world: str, how: str
) -> None:
    masters = seawall_masters_factory(5)
    urls = [m.url for m in masters]
    getattr(masters[0], how)()
    getattr(masters[1], how)()
    for run in range(3):
        # Up to several attempts: a cold client's first round opens its connections and
        # loads the script (several round trips), which a loaded machine may not fit in
        # node_timeout; the warm rounds then succeed at once. Beside the suite's heaviest
        # tests on 2 cores, 2 s of attempts once all missed a majority: 5 s.
        taken, took, attempts = acquire_in(world, urls, f"two-down-{run}", timeout=5.0)
        assert taken, f"3 of 5 masters up, yet no majority in {attempts} attempts ({took:.2f} s)"
        assert took <= 5.0 + SLACK
    getattr(masters[2], how)()
    reachable = [m.client() for m in masters[3:]]
    try:
        taken, took, _ = acquire_in(world, urls, "three-down", blocking=False)
        assert not taken
        # An attempt + a release round, never a hang.
        assert took <= 2 * NODE_TIMEOUT + SLACK + COLD_CLIENTS
        taken, took, attempts = acquire_in(world, urls, "three-down", timeout=6 * NODE_TIMEOUT)
        assert not taken
        assert attempts >= 2  # retried after random delays
        # Each attempt: one round + one release round + a retry delay (<= 0.1 s).
        assert took <= attempts * (2 * NODE_TIMEOUT + 0.1) + SLACK + COLD_CLIENTS
        assert took <= 8 * NODE_TIMEOUT + SLACK + COLD_CLIENTS
        for client in reachable:
            assert lock_keys(client) == []
            assert client.exists("seawall:redlock:{three-down}:fence")  # granted, released
    finally:
        for master in masters[:3]:
            if master.paused:
                master.resume()


# A timing bound (a wait, a takeover, a share of turns) that failed beside the parallel
# workers on 2 cores: measured alone after the parallel part (`scripts/dev.py test`).
@pytest.mark.serial
def test_sync_frozen_masters_do_not_exhaust_the_shared_pool(seawall_masters_factory: Any) -> None:
    """Clients without socket_timeout, 2 of 5 masters SIGSTOPped: 200 acquires from 8
    threads. A read on a frozen master blocks its thread for good, so each client has at
    most one request on the shared pool threads at a time (others skip that master
    meanwhile); masters that answer are then asked from the calling thread, bounded by
    the per-node timeout. Every acquire succeeds, the pool stays small."""
    masters = seawall_masters_factory(5)
    clients = [redis.Redis.from_url(m.url, socket_timeout=None) for m in masters]
    masters[0].pause()
    masters[1].pause()
    outcomes: list[tuple[int, bool, float, int]] = []

    def worker(index: int) -> None:
        for run in range(25):
            lock = seawall.Redlock(
                clients,
                f"pool-{index}-{run}",
                ttl=2.0,
                node_timeout=NODE_TIMEOUT,
                retry_delay=0.05,
            )
            started = time.monotonic()
            # 3 s: room for a few rounds when 8 threads share 2 loaded cores (a round
            # must hear 3 masters within the per-node timeout).
            taken = lock.acquire(timeout=3.0)
            took = time.monotonic() - started
            if taken:
                lock.release()
            outcomes.append((run, taken, took, lock.attempts))

    try:
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        masters[0].resume()
        masters[1].resume()
    assert len(outcomes) == 200
    assert all(taken for _, taken, _, _ in outcomes)
    assert max(took for _, _, took, _ in outcomes) <= 3.0 + 2 * NODE_TIMEOUT + SLACK
    # Once the masters that answer are known, an acquire waits for no timeout at all.
    later = sorted(took for run, _, took, _ in outcomes if run >= 2)
    assert later[len(later) // 2] < NODE_TIMEOUT
    assert sorted(attempts for run, _, _, attempts in outcomes if run >= 2)[len(later) // 2] == 1
    pool_threads = [t for t in threading.enumerate() if t.name == "seawall-redlock"]
    assert len(pool_threads) <= _fanout.NODE_POOL_SIZE


# A bound per acquire (0.2 s per node) that 8 threads missed beside the parallel workers
# on 2 cores (healthy masters answered late, so acquires lacked a majority): run alone.
@pytest.mark.serial
def test_sync_master_frozen_mid_use_skipped_then_back_without_leaking(
    seawall_masters_factory: Any,
) -> None:
    """Masters known to answer are asked from the calling thread; one frozen with CLIENT
    PAUSE under 8 threads costs each acquire at most the per-node timeout, its late
    replies are read once it is back, and its connections are reused, not leaked."""
    masters = seawall_masters_factory(5)
    clients = [redis.Redis.from_url(m.url, client_name="rl-user") for m in masters]
    admin = masters[0].client()
    failures: list[str] = []
    took: list[float] = []

    def cycles(index: int, count: int, blocking: bool) -> None:
        for run in range(count):
            lock = seawall.Redlock(
                clients, f"frz-{index}-{run}", ttl=2.0, node_timeout=NODE_TIMEOUT, retry_delay=0.05
            )
            started = time.monotonic()
            if lock.acquire(blocking, 2.0 if blocking else -1):
                lock.release()
            else:
                failures.append(f"{index}-{run}")
            took.append(time.monotonic() - started)

    def in_threads(count: int, blocking: bool = False) -> None:
        threads = [threading.Thread(target=cycles, args=(i, count, blocking)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)

    # Cold clients: a master's first request goes through the pool threads, one at a
    # time per master, so concurrent first attempts may have to retry.
    in_threads(5, blocking=True)
    took.clear()
    admin.client_pause(800, all=True)
    in_threads(10)
    time.sleep(1.0)  # the pause is over; late replies have arrived
    in_threads(10)
    assert failures == []
    assert max(took) <= 2 * NODE_TIMEOUT + SLACK
    users = [c for c in admin.client_list() if c.get("name") == "rl-user"]
    assert len(users) <= 16  # one per thread, plus a few opened by the pool threads
    # Every connection parked during the freeze was drained and returned (redis-py's pool
    # keeps lent connections in this set; a lost one would stay there for good).
    assert len(clients[0].connection_pool._in_use_connections) == 0


# --- acceptance 3: a frozen master and paused clients; never two holders -------------------


def _process_state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _resume_when_stopped(
    process: Any,
    pipe: Any,
    hold_for: float,
    done: threading.Event,
    paused: list[float],
    outcomes: list[Any],
) -> None:
    """Each time the client says it stops itself, wait until it is stopped, keep it so
    for `hold_for` seconds, then SIGCONT it; collect its outcomes at the end."""
    while not done.is_set():
        if not pipe.poll(0.05):
            continue
        message = pipe.recv()
        if message[0] == "done":
            outcomes.extend(message[1])
            return
        deadline = time.monotonic() + 10
        while _process_state(process.pid) != "T" and time.monotonic() < deadline:
            time.sleep(0.001)
        stopped = time.monotonic()
        time.sleep(hold_for)
        os.kill(process.pid, signal.SIGCONT)
        paused.append(time.monotonic() - stopped)


def _freeze_masters(
    masters: list[Any], ttl: float, done: threading.Event, frozen: list[float]
) -> None:
    """One master at a time frozen with CLIENT PAUSE for 0.5-2 x ttl, at random."""
    admins = [m.client() for m in masters]
    rng = random.Random()
    while not done.is_set():
        length = rng.uniform(0.5, 2.0) * ttl
        rng.choice(admins).client_pause(int(length * 1000), all=True)
        frozen.append(length)
        done.wait(length + rng.uniform(0, ttl))


def test_frozen_master_and_paused_clients_never_two_holders(
    seawall_masters_factory: Any,
) -> None:
    ttl, node_timeout, target = 0.3, 0.05, 1000
    masters = seawall_masters_factory(5)
    urls = [m.url for m in masters]
    names = [f"trial-{i}" for i in range(16)]
    attempts = FORKSERVER.Value("i", 0)
    until = time.monotonic() + 30
    done = threading.Event()
    frozen: list[float] = []
    paused: list[float] = []
    paused_outcomes: list[Any] = []
    freezer = threading.Thread(target=_freeze_masters, args=(masters, ttl, done, frozen))
    resumers = []
    pausing = []
    for world in ("sync", "async"):
        parent_end, child_end = FORKSERVER.Pipe()
        process = FORKSERVER.Process(
            target=paused_client, args=(urls, world, names, ttl, 3, child_end), daemon=True
        )
        pausing.append((process, world))
        resumers.append(
            threading.Thread(
                target=_resume_when_stopped,
                args=(process, parent_end, 1.5 * ttl, done, paused, paused_outcomes),
            )
        )
    with FORKSERVER.Pool(4, initializer=share, initargs=({"attempts": attempts},)) as pool:
        freezer.start()
        for process, _ in pausing:
            process.start()
        for resumer in resumers:
            resumer.start()
        jobs = [
            pool.apply_async(
                trial_worker,
                (urls, world, names, ttl, node_timeout, 4, target, until),
            )
            for world in ("sync", "sync", "async", "async")
        ]
        try:
            rows = [row for job in jobs for row in job.get(60)]
        finally:
            done.set()
            freezer.join()
            for resumer in resumers:
                resumer.join()
    for process, _ in pausing:
        process.join(10)
        assert process.exitcode == 0

    successes = [row for row in rows if row[2] >= 0]
    assert len(rows) >= target
    assert len(successes) >= 150
    assert len(frozen) >= 3 and len(paused) >= 6
    assert min(paused) > ttl
    # A client paused past the ttl between sending and reading never reports a hold.
    assert len(paused_outcomes) == 6
    assert [row for row in paused_outcomes if row[2]] == []
    # No success with validity <= 0, and none claiming more than the keys can last (the
    # library's clock starts just after `sent`, so `sent` cannot bound it more tightly).
    for _name, _sent, _acquired, _end, validity in successes:
        assert 0 < validity <= ttl - _redlock.drift(ttl)
    by_name: dict[str, list[tuple[int, int]]] = collections.defaultdict(list)
    for name, _, acquired, end, _ in successes:
        by_name[name].append((acquired, end))
    overlaps = [
        (name, a, b)
        for name, holds in by_name.items()
        for a, b in itertools.pairwise(sorted(holds))
        if b[0] < a[1]
    ]
    assert overlaps == []
    print(
        f"frozen masters: {len(rows)} attempts, {len(successes)} holds over {len(names)} "
        f"names, {len(frozen)} CLIENT PAUSEs, {len(paused)} client SIGSTOPs "
        f"({min(paused):.2f}-{max(paused):.2f} s), 0 overlaps"
    )


# --- acceptance 4: split votes ---------------------------------------------------------------


# A fresh-clone run beside the parallel workers saw a round need 14 retries: a client that
# had won some masters was descheduled before its release round, and nobody could win the
# rest meanwhile. The split votes themselves are what this measures: run alone.
@pytest.mark.serial
def test_split_votes_every_round_has_a_winner_within_ten_retries(seawall_masters: Any) -> None:
    rounds = 200
    urls = [m.url for m in seawall_masters]
    for client in (m.client() for m in seawall_masters):
        client.flushall()
    barrier = FORKSERVER.Barrier(16)
    shared = {"barrier": barrier, "won": FORKSERVER.Value("i", 0)}
    # 16 clients: 8 threads in one process, 8 asyncio tasks in another.
    with FORKSERVER.Pool(2, initializer=share, initargs=(shared,)) as pool:
        jobs = [
            pool.apply_async(split_voter, (urls, world, 8, rounds)) for world in ("sync", "async")
        ]
        wins = [row for job in jobs for row in job.get(120)]
    per_round: dict[int, list[tuple[int, int, int, int]]] = collections.defaultdict(list)
    for row in wins:
        per_round[row[0]].append(row)
    assert sorted(per_round) == list(range(rounds)), "a round without a winner"
    assert all(len(rows) == 1 for rows in per_round.values()), "two winners in one round"
    retries = [rows[0][1] - 1 for rows in per_round.values()]
    assert max(retries) <= 10
    print(f"split votes: retries per winning client: {collections.Counter(retries)}")
