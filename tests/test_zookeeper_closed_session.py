"""A ZooKeeper waiter whose session is closed under it (seawall.zookeeper._session's
close_all, as seawall's test fixtures do before a server stops) queues again in a new
session instead of retrying on the closed one until its timeout, or for ever.

The asyncio twin is generated from the same code (scripts/unasync.py --check).
Found by kazoo's own lock tests (test_cp_lock_peer_suites.py): a waiter blocked without a
timeout while its session was closed never returned; one with a timeout returned False.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest

import seawall
import seawall.zookeeper
from seawall.zookeeper._session import close_all

# The closed session's watch never fires; the change of its state wakes the waiter.
LOOKS_AGAIN = 2.0


def test_a_waiter_queues_again_when_its_session_is_closed(seawall_zookeeper: Any) -> None:
    hosts = f"{seawall_zookeeper.hosts}/closed-session-{uuid.uuid4().hex}"
    lock = seawall.zookeeper.Lock(hosts, "orders:1", session_timeout=5.0)
    lock.acquire()
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(lock.acquire(timeout=15.0)))
    waiter.start()
    time.sleep(0.5)  # queued behind the holder
    started = time.monotonic()
    close_all(hosts)  # the holder's node goes with the session
    waiter.join(20.0)
    try:
        assert got == [True], "the waiter did not queue again in a new session"
        assert time.monotonic() - started < LOOKS_AGAIN
        assert lock.locked()
        with pytest.raises(seawall.LockNotOwnedError):
            lock.release()  # the first hold went with the closed session
    finally:
        close_all(hosts)
