"""CPython's own lock tests, unchanged, with seawall's locks as their lock types.

Run as a script by test_lock_peer_suites.py, in a process of its own:

    python tests/lockpeers_cpython.py REDIS_URL OUT.json CLASS,... [LAST,...]

The test cases are the running interpreter's `test.lock_tests` (its standard library's own
test suite): the classes below only say how to build a lock, as CPython's
test_threading.py does for threading's, with a fresh lock name per call on the server at
REDIS_URL. The tests named in LAST ("Class.test_x") run after the others: those that fail
here may leave threads blocked for good, which must not disturb the tests that follow.
Each test's outcome is written to OUT.json as {"Class.test_x": [outcome, detail]}.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import threading
import time
import traceback
import unittest
import uuid
from typing import Any

import redis

import seawall
from seawall.locks._sync.waker import get_waker
from seawall.shared import _fanout

try:
    from test import lock_tests, support
except ImportError as exc:  # reported by the parent test, which names what to install
    print(f"MISSING-TEST-PACKAGE: {exc}", flush=True)
    sys.exit(3)

# CPython's helpers wait up to SHORT_TIMEOUT (30 s) for threads that never come: a test
# that fails because a thread stays blocked must not take a minute (regrtest sets it too).
# Longer than a pool thread of seawall's may linger when idle (NODE_POOL_IDLE_EXIT, 5 s):
# one that a busy moment started inside a test ends within it.
support.SHORT_TIMEOUT = 6.0
TTL = 10.0

_client: redis.Redis | None = None
_names = itertools.count()
_RUN = uuid.uuid4().hex[:8]


def _name(kind: str) -> str:
    return f"cpython:{_RUN}:{kind}:{next(_names)}"


def _client_here() -> redis.Redis:
    assert _client is not None, "run as a script: the server's URL is its first argument"
    return _client


class LockTests(lock_tests.LockTests):
    def locktype(self) -> seawall.Lock:
        return seawall.Lock(_client_here(), _name("lock"), ttl=TTL)


class RLockTests(lock_tests.RLockTests):
    def locktype(self) -> seawall.RLock:
        return seawall.RLock(_client_here(), _name("rlock"), ttl=TTL)


class SemaphoreTests(lock_tests.SemaphoreTests):
    # threading.Semaphore's default value is 1; seawall.Semaphore's is 3.
    def semtype(self, value: int = 1) -> seawall.Semaphore:
        return seawall.Semaphore(_client_here(), _name("semaphore"), value=value, ttl=TTL)


class BoundedSemaphoreTests(lock_tests.BoundedSemaphoreTests):
    def semtype(self, value: int = 1) -> seawall.Semaphore:
        return seawall.Semaphore(_client_here(), _name("bounded"), value=value, ttl=TTL)


CLASSES = {
    cls.__name__: cls for cls in (LockTests, RLockTests, SemaphoreTests, BoundedSemaphoreTests)
}


def _start_background_threads(client: redis.Redis) -> None:
    """Start seawall's per-process threads (the wake-up listener, the pools that renew
    leases and bound calls) before any test: CPython's tests count the process's threads
    around each step, and a thread of the process starting inside one reads as a leak.
    A hold kept for the whole run, and a thread waiting for it, keep the listener up."""
    keeper = seawall.Lock(client, _name("keeper"), ttl=TTL)
    assert keeper.acquire()
    waiter = seawall.Lock(client, keeper.name, ttl=TTL)
    threading.Thread(target=waiter.acquire, daemon=True).start()
    waker = get_waker(client)
    deadline = time.monotonic() + 10.0
    while not waker.ready:
        assert time.monotonic() < deadline, "seawall's wake-up listener never started"
        time.sleep(0.01)
    for submit, count in (
        (lambda job: _fanout._get_node_pool().submit(lambda _: job(), None), 8),
        (_fanout.run_soon, _fanout.WORK_POOL_LINGER),
    ):
        gate = threading.Barrier(count + 1)
        for _ in range(count):
            submit(lambda gate=gate: gate.wait(10))
        gate.wait(10)


class _Outcomes(unittest.TestResult):
    def __init__(self) -> None:
        super().__init__()
        self.outcomes: dict[str, list[str]] = {}
        self._started = 0.0

    def startTest(self, test: unittest.TestCase) -> None:
        super().startTest(test)
        self._started = time.monotonic()

    @staticmethod
    def _id(test: unittest.TestCase) -> str:
        return f"{type(test).__name__}.{test._testMethodName}"

    def _note(self, test: unittest.TestCase, outcome: str, detail: str = "") -> None:
        self.outcomes[self._id(test)] = [outcome, detail[-1500:]]
        took = time.monotonic() - self._started
        print(f"{self._id(test)}: {outcome} ({took:.2f} s)", flush=True)

    def addSuccess(self, test: unittest.TestCase) -> None:
        self._note(test, "passed")

    def addFailure(self, test: unittest.TestCase, err: Any) -> None:
        self._note(test, "failed", "".join(traceback.format_exception(*err)))

    def addError(self, test: unittest.TestCase, err: Any) -> None:
        self._note(test, "failed", "".join(traceback.format_exception(*err)))

    def addSkip(self, test: unittest.TestCase, reason: str) -> None:
        self._note(test, "skipped", reason)

    def addExpectedFailure(self, test: unittest.TestCase, err: Any) -> None:
        self._note(test, "failed", "expected failure")

    def addUnexpectedSuccess(self, test: unittest.TestCase) -> None:
        self._note(test, "passed")


def main(url: str, out: str, classes: list[str], last: set[str]) -> None:
    global _client
    _client = redis.Redis.from_url(url)
    _start_background_threads(_client)
    loader = unittest.TestLoader()
    tests = [
        test
        for name in classes
        for test in loader.loadTestsFromTestCase(CLASSES[name])
        if isinstance(test, unittest.TestCase)
    ]
    tests.sort(key=lambda test: _Outcomes._id(test) in last)  # stable: else as loaded
    suite = unittest.TestSuite(tests)
    result = _Outcomes()
    suite.run(result)
    with open(out, "w") as file:
        json.dump(result.outcomes, file, indent=1)
    # Threads that a failed test left blocked for ever must not hold up the exit.
    os._exit(0)


if __name__ == "__main__":
    main(
        sys.argv[1],
        sys.argv[2],
        sys.argv[3].split(","),
        set(sys.argv[4].split(",")) if len(sys.argv) > 4 else set(),
    )
