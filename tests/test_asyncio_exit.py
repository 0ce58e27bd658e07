"""asyncio.run() returns promptly when seawall's listeners are running in its loop.

At the loop's end asyncio cancels every task and waits for them. redis-py's pub/sub read
can end a cancelled wait as an ordinary "no message" timeout; a listener that went on
looping then kept asyncio.run() from returning for its idle period (10 s) or longer, and a
process that waited on another's cache load hung at exit. Before the fix, 40 rounds on the
cluster did not finish in 120 s; after, they take about 9 s.
"""

from __future__ import annotations

import multiprocessing

import exitworkers
import pytest
from conftest import SPAWN, Target

ROUNDS = 20


def test_event_loops_with_listeners_end_promptly(target: Target) -> None:
    with SPAWN.Pool(1) as pool:
        try:
            worst = pool.apply_async(
                exitworkers.slowest_exit, (target.url, target.cluster, ROUNDS)
            ).get(timeout=240)
        except multiprocessing.TimeoutError:
            pytest.fail(f"{ROUNDS} event loops did not end within 240 s")
    # Each round sleeps at most 0.3 s and connects a few times; a cancelled listener
    # that kept going would take its idle period (exitworkers.IDLE_EXIT, 300 s) or more.
    assert worst < 60.0, f"an event loop took {worst:.1f} s to end"
