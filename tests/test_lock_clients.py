"""The lock with the clients users bring: Sentinel-managed, ACL users, RESP3."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import redis
from conftest import Target

import seawall


def test_lock_through_a_sentinel_managed_client(seawall_sentinel: Any) -> None:
    r = seawall_sentinel.master_client()
    lock = seawall.Lock(r, "sentinel-lock", ttl=1.0)
    got: list[float] = []

    def wait() -> None:
        other = seawall.Lock(seawall_sentinel.master_client(), "sentinel-lock", ttl=1.0)
        assert other.acquire(timeout=5)
        got.append(time.monotonic())
        other.release()

    with lock:
        waiter = threading.Thread(target=wait)
        waiter.start()
        time.sleep(1.5)  # longer than the ttl: renewal goes through the Sentinel client
        assert lock.owned()
        released_at = time.monotonic()
    waiter.join(5)
    assert got and got[0] - released_at < 0.2
    assert lock.fence >= 1


@pytest.mark.parametrize("protocol", [2, 3])
def test_lock_as_an_acl_user_limited_to_seawall_keys(standalone: Target, protocol: int) -> None:
    admin = standalone.sync()
    admin.acl_setuser(
        "app",
        enabled=True,
        passwords=["+app-secret"],
        keys=["seawall:*"],
        channels=["seawall:*"],
        commands=["+@all", "-flushall", "-flushdb"],
    )
    try:
        r = standalone.sync(username="app", password="app-secret", protocol=protocol)
        lock = seawall.Lock(r, "acl", ttl=1.0)
        waiter_took: list[int] = []

        def wait() -> None:
            other = seawall.Lock(
                standalone.sync(username="app", password="app-secret", protocol=protocol),
                "acl",
                ttl=1.0,
            )
            assert other.acquire(timeout=5)
            waiter_took.append(other.fence)
            other.release()

        with lock:
            waiter = threading.Thread(target=wait)
            waiter.start()
            time.sleep(0.3)
        waiter.join(5)
        assert waiter_took == [lock.fence + 1]
        with pytest.raises(redis.exceptions.NoPermissionError):
            r.set("not-seawall", "x")  # the ACL really is limited
    finally:
        admin.acl_deluser("app")
