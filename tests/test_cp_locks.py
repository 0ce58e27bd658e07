"""seawall.etcd.Lock and seawall.zookeeper.Lock against real servers: exclusion across
processes, fences, dead and frozen holders, server restarts and frozen servers."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis
from cplockworkers import holder, ledger, make_lock
from forked import FORKSERVER as FORK

import seawall

# etcd's smallest lease on a default single member is 2 s (it raises shorter ones). A
# ZooKeeper session could be as short as the test server's 2 ticks (0.4 s), but the
# holder's session must not expire before the test kills or freezes it, and a 1 s
# session leaves kazoo a third of a second between pings and drops a connection silent
# for 0.67 s: too thin a margin on a loaded 2-core machine. 2 s, like etcd's.
SHORT = {"etcd": 2.0, "zookeeper": 2.0}


@dataclass
class Backend:
    name: str
    server: Any

    @property
    def address(self) -> str:
        return str(self.server.endpoint if self.name == "etcd" else self.server.hosts)

    def lock(self, name: str, ttl: float = 10.0, **kwargs: Any) -> Any:
        return make_lock(self.name, self.address, name, ttl, **kwargs)

    def aio_lock(self, name: str, ttl: float = 10.0, **kwargs: Any) -> Any:
        if self.name == "etcd":
            import seawall.etcd.aio

            return seawall.etcd.aio.Lock(self.address, name, ttl=ttl, **kwargs)
        import seawall.zookeeper.aio

        return seawall.zookeeper.aio.Lock(self.address, name, session_timeout=ttl, **kwargs)


@pytest.fixture(params=["etcd", "zookeeper"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    server = request.getfixturevalue(f"seawall_{request.param}")
    yield Backend(request.param, server)
    # A test that froze or stopped the session server leaves it serving again.
    if server.paused:
        server.resume()
    elif not server.running:
        server.restart()


def fresh(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def test_four_processes_never_overlap_and_fences_increase(backend: Backend, tmp_path: Any) -> None:
    path = str(tmp_path / "counter")
    open(path, "w").close()
    name, rounds = fresh(), 10
    procs = [
        FORK.Process(target=ledger, args=(backend.name, backend.address, name, path, rounds))
        for _ in range(4)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    with open(path) as counter:
        assert int(counter.read()) == 4 * rounds  # no lost update
    with open(path + ".ledger") as out:
        lines = [line.split() for line in out.read().splitlines()]
    assert len(lines) == 2 * 4 * rounds
    fences = []
    for enter, leave in zip(lines[::2], lines[1::2], strict=True):
        assert enter[0] == "in" and leave[0] == "out"
        assert enter[1:] == leave[1:], "two holders overlapped"
        fences.append(int(enter[2]))
    assert all(a < b for a, b in itertools.pairwise(fences)), fences


def test_api_matches_seawall_lock(backend: Backend) -> None:
    name = fresh()
    lock, other = backend.lock(name), backend.lock(name)
    assert not lock.locked()
    assert lock.acquire() is True
    first = lock.fence
    assert lock.locked() and lock.owned() and not other.owned()
    assert other.acquire(blocking=False) is False
    started = time.monotonic()
    assert other.acquire(timeout=0.3) is False
    # Up to GIVE_BACK (0.5 s) more to take its queued node or key back, and room for a
    # loaded machine: the bound shows the timeout is kept, not how fast the server is.
    assert 0.25 < time.monotonic() - started < 3.0
    with pytest.raises(seawall.LockError, match="not reentrant"):
        lock.acquire()
    lock.release()
    assert not lock.locked()
    with pytest.raises(seawall.LockNotOwnedError):
        lock.release()
    with other:
        assert other.fence > first and other.owned()
    assert 1 <= other.fence < 2**53
    blocked = backend.lock(name, timeout=0.2)
    with lock, pytest.raises(seawall.LockTimeout, match=name), blocked:
        pass


def test_bad_input_is_refused_as_seawall_lock_refuses_it(backend: Backend) -> None:
    lock = backend.lock(fresh())
    with pytest.raises(ValueError, match="non-blocking acquire takes no timeout"):
        lock.acquire(False, 1)
    with pytest.raises(ValueError, match=">= 0 seconds"):
        lock.acquire(timeout=-2)
    with pytest.raises(ValueError, match="timeout"):
        backend.lock(fresh(), timeout=-1)
    with pytest.raises(TypeError, match="name must be a str"):
        backend.lock(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="must not be empty"):
        backend.lock("")
    with pytest.raises(TypeError, match="on_lost"):
        backend.lock(fresh(), on_lost=5)
    with pytest.raises(ValueError, match="seconds"):
        backend.lock(fresh(), ttl=0)
    with pytest.raises(seawall.LockError, match="no fence yet"):
        _ = lock.fence
    with pytest.raises(TypeError):
        make_lock(backend.name, None, fresh())  # type: ignore[arg-type]


def test_a_killed_holder_frees_the_lock_within_its_lease(backend: Backend) -> None:
    name, ttl = fresh(), SHORT[backend.name]
    parent, child = FORK.Pipe()
    proc = FORK.Process(target=holder, args=(backend.name, backend.address, name, ttl, "", child))
    proc.start()
    assert parent.poll(30)
    dead_fence = parent.recv()
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    killed = time.monotonic()
    lock = backend.lock(name)
    assert lock.acquire(timeout=ttl + 8.0)
    waited = time.monotonic() - killed
    assert lock.fence > dead_fence
    lock.release()
    # Freed once the lease or session ran out (etcd looks for expired leases every 0.5 s,
    # ZooKeeper every tick), with room for a loaded machine.
    assert waited < ttl + 6.0, waited


def test_a_paused_holder_is_fenced_out_and_cannot_release(
    backend: Backend, seawall_url: str
) -> None:
    name, ttl = fresh(), SHORT[backend.name]
    parent, child = FORK.Pipe()
    args = (backend.name, backend.address, name, ttl, seawall_url, child)
    proc = FORK.Process(target=holder, args=args)
    proc.start()
    assert parent.poll(30)
    stale = parent.recv()
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        lock = backend.lock(name)
        assert lock.acquire(timeout=ttl + 6.0), "the paused holder's lease never ran out"
        assert lock.fence > stale
        r = redis.Redis.from_url(seawall_url)
        assert seawall.fenced_write(r, f"ledger:{name}", "new", lock.fence)
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    parent.send("write")
    assert parent.poll(30)
    wrote, owned, released, lost = parent.recv()
    proc.join(10)
    assert (wrote, owned, released) == (False, False, "not owned")
    assert lost, "on_lost did not fire when the holder found its lease gone"

    assert seawall.fenced_read(r, f"ledger:{name}")[0] == b"new"
    assert lock.owned()
    lock.release()
    r.close()


@pytest.mark.serial
def test_a_waiter_is_woken_not_polled(backend: Backend) -> None:
    name = fresh()
    lock, waiter = backend.lock(name), backend.lock(name)
    delays: list[float] = []
    for _ in range(3):
        lock.acquire()
        got: list[float] = []
        thread = threading.Thread(
            target=lambda got=got: got.append(waiter.acquire() and time.monotonic())
        )
        thread.start()
        time.sleep(0.15)  # surely queued and watching by now
        released = time.monotonic()
        lock.release()
        thread.join(10)
        delays.append(got[0] - released)
        waiter.release()
    # The fallback look comes after 5 s of silence; a woken waiter is in within ms.
    assert max(delays) < 1.0, delays


def test_timeouts_hold_against_a_frozen_server(backend: Backend) -> None:
    name = fresh()
    lock = backend.lock(name)
    lock.locked()  # connected before the freeze
    backend.server.pause()
    try:
        started = time.monotonic()
        assert lock.acquire(timeout=0.5) is False
        assert time.monotonic() - started < 2.0
    finally:
        backend.server.resume()
    # Whatever the frozen server granted on thawing is given back: the lock is free.
    other = backend.lock(name)
    assert other.acquire(timeout=10.0)
    other.release()


def test_asyncio_twin(backend: Backend) -> None:
    async def main() -> None:
        name = fresh()
        lock = backend.aio_lock(name)
        other = backend.aio_lock(name, timeout=0.2)
        async with lock:
            fence = lock.fence
            assert await lock.owned() and await lock.locked()
            with pytest.raises(seawall.LockTimeout):
                async with other:
                    pass
            waiter = asyncio.create_task(other.acquire(timeout=10.0))
            await asyncio.sleep(0.2)
        assert await waiter
        assert other.fence > fence
        await other.release()
        assert not await lock.locked()
        with pytest.raises(ValueError):
            await lock.acquire(False, 1)

    asyncio.run(main())


def test_a_server_restart_keeps_holds_within_their_lease_and_frees_lost_ones(
    backend: Backend,
) -> None:
    """One restart, two holds. The server is down longer than the short hold's lease and
    shorter than the long one's. The long hold survives (the client reconnects, the
    server restored its lease or session) and its waiter gets the lock on release. The
    short hold is reported lost; the server restores it too, but seawall gives it up by
    itself, so it never blocks the lock."""
    # 2 s: etcd's shortest lease, and a ZooKeeper session that outlives the restart (so
    # the server would keep its node for as long as the process's session lives).
    # 30 s for the kept hold: it must outlast the whole outage (the short lease running
    # out, then a restart, then the client reconnecting), and on a loaded 2-core machine
    # a JVM restart alone can take several seconds: 10 s left too little margin.
    kept_name, lost_name, short, long = fresh(), fresh(), 2.0, 30.0
    kept, waiter = backend.lock(kept_name, ttl=long), backend.lock(kept_name, ttl=long)
    lost = threading.Event()
    doomed = backend.lock(lost_name, ttl=short, on_lost=lambda _: lost.set())
    assert kept.acquire() and doomed.acquire()
    fence = kept.fence
    got = threading.Event()
    thread = threading.Thread(target=lambda: waiter.acquire(timeout=60.0) and got.set())
    thread.start()
    time.sleep(0.2)
    backend.server.kill()
    try:
        assert lost.wait(short + 5.0), "on_lost never fired while the server was down"
    finally:
        backend.server.restart()
    assert not doomed.owned()
    # Freed without the short holder's release: seawall gave the lost hold up by itself.
    other = backend.lock(lost_name)
    assert other.acquire(timeout=short + 10.0), "the lost hold still blocks the lock"
    with pytest.raises(seawall.LockNotOwnedError, match="was lost"):
        doomed.release()
    other.release()
    deadline = time.monotonic() + 10.0
    while not kept.owned():  # the client reconnects; the hold was kept
        assert time.monotonic() < deadline, "the hold did not survive the restart"
        time.sleep(0.05)
    assert not got.is_set()
    kept.release()
    assert got.wait(10.0), "the waiter was not given the lock after the restart"
    thread.join()
    assert waiter.fence > fence
    waiter.release()
