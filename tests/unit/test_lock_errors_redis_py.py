"""seawall's lock errors are redis-py's too: code moving from `r.lock()` keeps catching
`redis.exceptions.LockError` and `LockNotOwnedError` around seawall's locks."""

from __future__ import annotations

import pickle

import pytest
import redis
import redis.exceptions

import seawall

SYNC = redis.Redis(port=1)  # never connects: a release of nothing held does no I/O


@pytest.mark.parametrize(
    "error",
    [seawall.LockError, seawall.LockNotOwnedError, seawall.LockTimeout],
)
def test_every_lock_error_is_a_redis_py_lock_error(error: type[seawall.LockError]) -> None:
    exc = error("lock 'orders:1' is busy", lock_name="orders:1")
    assert isinstance(exc, redis.exceptions.LockError)
    assert isinstance(exc, seawall.SeawallError)
    assert exc.lock_name == "orders:1"
    assert str(exc) == "lock 'orders:1' is busy"
    # redis-py's errors show only their class in repr; seawall's keep their message.
    assert "is busy" in repr(exc)
    copy = pickle.loads(pickle.dumps(exc))
    assert (type(copy), str(copy), copy.lock_name) == (error, str(exc), "orders:1")


def test_not_owned_is_redis_py_s_not_owned_and_still_a_runtime_error() -> None:
    lock = seawall.Lock(SYNC, "orders:1")
    with pytest.raises(redis.exceptions.LockNotOwnedError) as caught:
        lock.release()
    assert isinstance(caught.value, RuntimeError)
    assert isinstance(caught.value, seawall.LockNotOwnedError)
    assert caught.value.lock_name == "orders:1"
