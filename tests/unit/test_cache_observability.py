"""What the cache and its breaker log: once per outage, never the logger's name again, and
not a second time what the caller's exception already says."""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from pathlib import Path

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from seawall.cache._breaker import CircuitBreaker
from seawall.cache._stats import CacheStats, Counters
from seawall.shared import _concurrency

SRC = Path(__file__).resolve().parents[2] / "src" / "seawall"


def test_an_outage_is_logged_once_when_it_opens_and_once_when_it_closes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    breaker = CircuitBreaker(2, open_for=1.0, call_timeout=0.1, clock=lambda: now[0], name="b1")
    caplog.set_level(logging.DEBUG, logger="seawall")
    for _ in range(2):
        assert breaker.allow()
        breaker.failure()
    for _ in range(5):  # probes keep failing: it reopens every open_for, quietly
        assert not breaker.allow()
        now[0] += 1.0
        assert breaker.allow()
        breaker.failure()
    now[0] += 1.0
    assert breaker.allow()
    breaker.success()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2, warnings
    assert warnings[0].startswith("circuit breaker b1 opened after 2 failed call(s)")
    closed = r"circuit breaker b1 closed: .* open 6\.00 s and turned away 5 call"
    assert re.match(closed, warnings[1]), warnings


def test_a_cleanup_that_cannot_reach_redis_is_debug_other_failures_warn(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="seawall")

    def down() -> None:
        raise RedisConnectionError("refused")

    def broken() -> None:
        raise KeyError("bug")

    _concurrency.background(down, "release of lock 'a'")
    _concurrency.background(broken, "release of lock 'b'")
    _concurrency.background(down, "a refresh", cleanup=False)
    _concurrency.spawn(down, "giving back a lease", cleanup=True)
    _concurrency.spawn(down, "a task")
    for thread in threading.enumerate():  # the spawned threads log before they end
        if thread.name in ("giving back a lease", "a task"):
            thread.join(30)

    async def cleanup() -> None:
        _concurrency.async_background(_adown, "x")
        await asyncio.sleep(0.01)

    asyncio.run(cleanup())
    levels = [(r.levelname, r.getMessage().split(" failed")[0]) for r in caplog.records]
    assert sorted(levels) == sorted(
        [  # the threads and the task log in any order
            ("DEBUG", "release of lock 'a'"),
            ("WARNING", "release of lock 'b'"),
            ("WARNING", "a refresh"),
            ("DEBUG", "giving back a lease"),
            ("WARNING", "a task"),
            ("DEBUG", "x"),
        ]
    )


async def _adown() -> None:
    raise RedisConnectionError("refused")


def test_no_message_repeats_the_logger_name() -> None:
    found = []
    for path in SRC.rglob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"""\blog\w*\.\w+\(\s*f?["']seawall: """, line) or re.match(
                r"""\s+f?["']seawall: """, line
            ):
                found.append(f"{path.relative_to(SRC)}:{number}")
    assert found == []


def test_hit_rate_is_the_share_of_reads_the_loader_never_saw() -> None:
    assert CacheStats().hit_rate == 0.0
    assert CacheStats(l1_hits=2, l2_hits=1, misses=1).hit_rate == 0.75


def test_counts_stay_exact_under_threads_and_snapshots() -> None:
    # Single counts tick without a lock and each snapshot ticks every ticker: neither
    # threads nor snapshots taken meanwhile may lose or add a count.
    counters = Counters("ns")
    threads, per_thread = 8, 5_000
    done = threading.Event()
    seen: list[CacheStats] = []

    def work() -> None:
        for i in range(per_thread):
            counters.add("l1_hits")
            if i % 100 == 0:
                counters.add("loads", 3)

    def watch() -> None:
        while not done.is_set():
            seen.append(counters.snapshot())

    watcher = threading.Thread(target=watch)
    watcher.start()
    workers = [threading.Thread(target=work) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    done.set()
    watcher.join()
    final = counters.snapshot()
    assert final.l1_hits == threads * per_thread
    assert final.loads == threads * (per_thread // 100) * 3
    assert final.misses == 0 and final.absent_hits == 0
    assert seen, "the watcher took no snapshot while the workers ran"
    hits = [stats.l1_hits for stats in seen]
    assert hits == sorted(hits) and hits[-1] <= final.l1_hits
