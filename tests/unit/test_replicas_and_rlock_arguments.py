"""Bad input to RLock and to `replicas=` fails at construction, saying what was expected."""

import math

import pytest
import redis
import redis.asyncio

import seawall
import seawall.aio
from seawall.locks._replication import ReplicaPolicy, replica_policy

SYNC = redis.Redis(port=1)  # never connects: construction does no I/O
ASYNC = redis.asyncio.Redis(port=1)

BAD = [
    ({"ttl": 0}, ValueError, "ttl of lock 'orders:1' must be .*>= 0.001"),
    ({"ttl": -5}, ValueError, ">= 0.001"),
    ({"ttl": math.nan}, ValueError, "finite"),
    ({"ttl": "30"}, TypeError, "number of seconds"),
    ({"replicas": -1}, ValueError, "replicas of lock 'orders:1' must be >= 0"),
    ({"replicas": 1.0}, TypeError, "must be an int number of replicas.*float"),
    ({"replicas": "1"}, TypeError, "must be an int number of replicas.*str"),
    ({"replicas": True}, TypeError, "must be an int number of replicas.*bool"),
    ({"replicas": None}, TypeError, "must be an int number of replicas"),
    ({"replica_timeout": 0}, ValueError, "replica_timeout of lock 'orders:1'"),
    ({"replica_timeout": -1.0}, ValueError, "replica_timeout"),
    ({"replica_timeout": math.inf}, ValueError, "replica_timeout.*finite"),
    ({"replica_timeout": "1"}, TypeError, "replica_timeout"),
]


@pytest.mark.parametrize("kind", ["Lock", "RLock"])
@pytest.mark.parametrize(("kwargs", "error", "words"), BAD)
def test_bad_arguments(kind: str, kwargs: dict[str, object], error: type, words: str) -> None:
    args: dict[str, object] = {"client": SYNC, "name": "orders:1", "ttl": 1.0}
    args.update(kwargs)
    with pytest.raises(error, match=words):
        getattr(seawall, kind)(**args)
    with pytest.raises(error, match=words):
        getattr(seawall.aio, kind)(**{**args, "client": ASYNC})


def test_rlock_names_itself_in_client_errors() -> None:
    with pytest.raises(TypeError, match=r"use seawall\.aio\.RLock"):
        seawall.RLock(ASYNC, "x")
    with pytest.raises(TypeError, match=r"use seawall\.RLock with sync clients"):
        seawall.aio.RLock(SYNC, "x")


def test_rlock_release_without_acquire() -> None:
    with pytest.raises(seawall.LockNotOwnedError, match="does not hold it"):
        seawall.RLock(SYNC, "x").release()
    with pytest.raises(seawall.LockNotOwnedError, match="does not hold it"):
        seawall.RLock(SYNC, "x").extend()


def test_rlock_keys_share_one_hash_tag_apart_from_lock() -> None:
    rlock = seawall.RLock(SYNC, "orders:1")
    assert rlock.key == "seawall:rlock:{orders:1}"
    assert rlock.holds_key == "seawall:rlock:{orders:1}:holds"
    assert seawall.Lock(SYNC, "orders:1").key != rlock.key


def test_zero_replicas_means_no_policy() -> None:
    assert replica_policy(0, 1.0, "lock 'x'") is None
    assert replica_policy(2, 0.25, "lock 'x'") == ReplicaPolicy(2, 0.25)


def test_policy_never_sends_wait_with_zero_ms() -> None:
    # WAIT n 0 would block forever.
    assert ReplicaPolicy(1, 0.0001).wait_ms == 1
    assert ReplicaPolicy(1, 0.25).wait_ms == 250


def test_policy_error_names_lock_counts_and_remedy() -> None:
    policy = ReplicaPolicy(2, 0.5)
    assert policy.enough(2) and policy.enough(3) and not policy.enough(1)
    error = policy.error("lock", "orders:1", 1)
    assert isinstance(error, seawall.LockError)
    assert (error.lock_name, error.required, error.acked) == ("orders:1", 2, 1)
    text = str(error)
    for words in ("'orders:1'", "only 1 of the 2", "0.5 s", "released", "replica_timeout="):
        assert words in text
