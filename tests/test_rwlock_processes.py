"""seawall.RWLock across processes: a ledger of 5,000 holds, and holders killed with SIGKILL."""

from __future__ import annotations

import bisect
import threading
import time
from typing import Any

from conftest import Target
from forked import FORKSERVER
from lockworkers import counter_key
from rwworkers import hold_side, rw_ops

import seawall
from seawall.locks import _rwpolicy

# --- acceptance 6: 16 readers and 4 writers, 5,000 holds in all ----------------------------


def test_writers_never_overlap_anyone_and_readers_overlap(standalone: Target) -> None:
    readers, writers = 16, 4
    reads_each, writes_each = 305, 30  # 4,880 reads + 120 writes
    jobs: list[tuple[Any, ...]] = []
    for i in range(readers + writers):
        kind = "read" if i < readers else "write"
        world = "async" if i % 2 else "sync"  # both implementations in one ledger
        n = reads_each if kind == "read" else writes_each
        jobs.append((standalone.url, False, world, "ledger", kind, n, 5.0))
    with FORKSERVER.Pool(readers + writers) as pool:
        ledgers = pool.starmap(rw_ops, jobs)
    entries = [entry for ledger in ledgers for entry in ledger]
    assert len(entries) == readers * reads_each + writers * writes_each == 5000
    assert int(standalone.sync().get(counter_key("ledger"))) == writers * writes_each
    # Every reader saw exactly the writes that had left before it entered: none in flight.
    write_exits = sorted(leave for kind, _, leave, _ in entries if kind == "write")
    misread = sum(
        1
        for kind, enter, _, value in entries
        if kind == "read" and value != bisect.bisect_left(write_exits, enter)
    )
    assert misread == 0

    # Sweep the intervals in time order: a writer's interval may overlap no other interval;
    # readers' intervals must overlap each other somewhere.
    events = sorted(
        [(enter, 1, kind) for kind, enter, _, _ in entries]
        + [(leave, 0, kind) for kind, _, leave, _ in entries]
    )
    inside = {"read": 0, "write": 0}
    writer_overlaps = reader_overlaps = 0
    for _, entering, kind in events:
        if not entering:
            inside[kind] -= 1
            continue
        if kind == "write" and inside["read"] + inside["write"] > 0:
            writer_overlaps += 1
        if kind == "read" and inside["write"] > 0:
            writer_overlaps += 1
        if kind == "read" and inside["read"] > 0:
            reader_overlaps += 1
        inside[kind] += 1
    assert writer_overlaps == 0
    assert reader_overlaps > 100, f"readers overlapped only {reader_overlaps} times"
    assert standalone.lock_keys() == []


# --- acceptance 6: a writer gets in within ttl + 1 s of a killed reader ---------------------


def _start_holder(target: Target, name: str, kind: str, ttl: float) -> tuple[Any, Any]:
    parent_end, child_end = FORKSERVER.Pipe()
    child = FORKSERVER.Process(
        target=hold_side, args=(target.url, name, kind, ttl, child_end, target.cluster)
    )
    child.start()
    assert parent_end.poll(30) and parent_end.recv()[0] == "waiting"
    return child, parent_end


def test_writer_gets_in_after_killed_reader_while_another_renews(standalone: Target) -> None:
    ttl = 1.5
    child, pipe = _start_holder(standalone, "killed-reader", "read", ttl)
    try:
        assert pipe.poll(20) and pipe.recv()[0] == "held"
        rw = seawall.RWLock(standalone.sync(), "killed-reader", ttl=ttl)
        live = rw.read()
        assert live.acquire(blocking=False)  # a live reader beside the doomed one
        child.kill()
        killed_at = time.monotonic()
        child.join(5)
        # The live reader keeps renewing (every ttl/3) past the dead reader's lease, then
        # leaves. Its renewals must not keep the dead reader's lease alive: the writer gets
        # in as soon as the live reader leaves, not a ttl later.
        # The writer waits in a thread of its own; the live reader leaves from this one,
        # the thread that holds it (only a hold's owner releases it).
        writer = rw.write()
        entered: list[tuple[float, int]] = []

        def write() -> None:
            if writer.acquire(timeout=ttl + 3):
                entered.append((time.monotonic(), writer.fence))
                writer.release()

        waiting = threading.Thread(target=write)
        waiting.start()
        time.sleep(ttl + 0.3)
        live.release()
        waiting.join(ttl + 5)
        assert entered, "the writer never got in"
        got_in, write_fence = entered[0]
        assert live.fence == 0 and write_fence > 0  # the name's first write hold
    finally:
        child.kill()
        child.join(5)
    assert got_in - killed_at <= ttl + 1.0, f"writer waited {got_in - killed_at:.2f} s"
    assert got_in - killed_at >= ttl + 0.3  # not before the live reader left


def test_dead_waiting_writer_stops_holding_readers_back(standalone: Target) -> None:
    writer_ttl = 0.5  # its intent lasts MIN_INTENT
    rw = seawall.RWLock(standalone.sync(), "dead-writer", ttl=10.0)
    reader = rw.read()
    assert reader.acquire()
    child, _pipe = _start_holder(standalone, "dead-writer", "write", writer_ttl)
    try:
        admin = standalone.sync()
        deadline = time.monotonic() + 20
        while admin.zcard(rw.keys.writers_waiting) == 0:
            assert time.monotonic() < deadline, "the writer never queued"
            time.sleep(0.01)
        late = rw.read()
        assert late.acquire(blocking=False) is False  # the waiting writer holds it back
        child.kill()
        killed_at = time.monotonic()
        child.join(5)
        assert late.acquire(timeout=10)
        waited = time.monotonic() - killed_at
        late.release()
        reader.release()
    finally:
        child.kill()
        child.join(5)
    assert waited <= _rwpolicy.intent_ttl(writer_ttl) + 1.0
    assert standalone.lock_keys() == []


def test_killed_writer_frees_the_lock_within_ttl(target: Target) -> None:
    ttl = 0.6
    child, pipe = _start_holder(target, "killed-writer", "write", ttl)
    try:
        assert pipe.poll(20)
        _, dead_fence = pipe.recv()
        # Connected (on Cluster: its slot map read) before the kill, so the time measured
        # is the lock's, not a connection's set-up on a busy machine.
        client = target.sync()
        client.ping()
        rw = seawall.RWLock(client, "killed-writer", ttl=ttl)
        reader, writer = rw.read(), rw.write()
        child.kill()
        killed_at = time.monotonic()
        assert reader.acquire(timeout=ttl + 3)
        waited = time.monotonic() - killed_at
        assert reader.fence == dead_fence  # the reader sees the dead writer's hold as newest
        reader.release()
        assert writer.acquire(blocking=False)
        assert writer.fence == dead_fence + 1
        writer.release()
    finally:
        child.kill()
        child.join(5)
    assert waited <= ttl + 0.5, f"reader waited {waited:.2f} s"
    assert target.lock_keys() == []
