"""Waiting in a test for what another thread, process or server does, on a machine that
may stall.

A CI machine of 2 cores can stop every process on it for seconds (a run has seen about
15 s). A wait that counted those seconds against its limit would fail a test for the
machine, not for the code under test. So each sleep between two looks is timed, and
what it overslept by more than STALL (this process was not running) is added to the
limit, up to MAX_STALLS in all: a condition that stays false while the machine runs
still fails within the limit, and a test whose bound is the property under test (woken
within 2 s) keeps that bound whenever the machine kept running.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

STALL = 0.5  # oversleeping by more than this is a stall of the machine, not the code
MAX_STALLS = 120.0  # a wait is never lengthened by more than this in all


def eventually(condition: Callable[[], Any], timeout: float, interval: float = 0.02) -> bool:
    """Whether `condition()` became true within `timeout` seconds of running time."""
    deadline = time.monotonic() + timeout
    stalled = 0.0
    while not condition():
        if time.monotonic() > deadline:
            return False
        before = time.monotonic()
        time.sleep(interval)
        overslept = time.monotonic() - before - interval
        if overslept > STALL and stalled < MAX_STALLS:
            deadline += overslept
            stalled += overslept
    return True


def wait_until(condition: Callable[[], Any], timeout: float, what: str) -> None:
    """`eventually`, failing the test with `what` if the condition did not come true."""
    if not eventually(condition, timeout):
        raise AssertionError(f"not within {timeout} s: {what}")
