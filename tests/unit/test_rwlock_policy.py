"""RWLock timing decisions and argument checks: pure, no server."""

from __future__ import annotations

import math

import pytest
import redis
import redis.asyncio

import seawall
import seawall.aio
from seawall.locks import _lease, _rwpolicy
from seawall.shared._keys import hash_tag, rwlock_keys

SYNC = redis.Redis(port=1)  # never connects: construction does no I/O
ASYNC = redis.asyncio.Redis(port=1)


def test_intent_follows_the_ttl_within_bounds() -> None:
    assert _rwpolicy.intent_ttl(0.01) == _rwpolicy.MIN_INTENT
    assert _rwpolicy.intent_ttl(2.0) == 2.0
    assert _rwpolicy.intent_ttl(30.0) == _rwpolicy.MAX_INTENT


def test_a_waiting_writer_refreshes_its_intent_in_time() -> None:
    for ttl in (0.01, 1.0, 30.0, 1e6):
        pause = _rwpolicy.writer_pause(-1, None, ttl)  # blocker without expiry: longest sleep
        assert 0 < pause <= _rwpolicy.intent_ttl(ttl) / _rwpolicy.INTENT_REFRESHES
    assert _rwpolicy.writer_pause(50, None, 30.0) == pytest.approx(0.051)
    assert _rwpolicy.writer_pause(10_000, 0.2, 30.0) == 0.2


def test_a_waiting_reader_refreshes_its_queue_entry_in_time() -> None:
    assert _rwpolicy.reader_pause(-1, None) == _lease.MAX_WAIT_SLICE
    assert _lease.MAX_WAIT_SLICE * 2 < _rwpolicy.READER_QUEUE_TTL
    assert _rwpolicy.reader_pause(20, 5.0) == pytest.approx(0.021)
    assert _rwpolicy.reader_pause(5000, 0.0) == 0.0


def test_ms_rounds_to_at_least_one() -> None:
    assert _rwpolicy.ms(0.0001) == 1
    assert _rwpolicy.ms(1.2345) == 1234


@pytest.mark.parametrize("name", ["orders", "{user:1}:orders", "}odd", "a{b"])
def test_every_key_shares_one_hash_tag(name: str) -> None:
    keys = rwlock_keys(name)
    tags = {hash_tag(key) for key in vars_of(keys)}
    assert len(tags) == 1 and None not in tags
    # The waker derives a queue from a wake-up key by appending ":waiters".
    assert keys.writers_waiting == keys.writer + ":waiters"
    assert keys.readers_waiting == keys.read_turn + ":waiters"
    assert len(set(vars_of(keys))) == 8


def vars_of(keys: object) -> list[str]:
    return [getattr(keys, field) for field in keys.__slots__]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"name": ""}, ValueError, "RWLock name must not be empty"),
        ({"name": None}, TypeError, "RWLock name must be a str"),
        ({"ttl": 0}, ValueError, "ttl of rwlock 'orders:1' .*>= 0.001"),
        ({"ttl": -1.0}, ValueError, "ttl of rwlock 'orders:1' .*>= 0.001"),
        ({"ttl": math.nan}, ValueError, "ttl of rwlock 'orders:1' .*finite"),
        ({"ttl": math.inf}, ValueError, "ttl of rwlock 'orders:1' .*finite"),
        ({"ttl": "30"}, TypeError, "ttl of rwlock 'orders:1' .*number of seconds"),
        ({"ttl": True}, TypeError, "ttl of rwlock 'orders:1'"),
        ({"timeout": -1}, ValueError, "timeout of rwlock 'orders:1'"),
        ({"timeout": "1"}, TypeError, "timeout of rwlock 'orders:1'"),
        ({"on_lost": 3}, TypeError, "on_lost of rwlock 'orders:1' must be callable"),
    ],
)
def test_bad_rwlock_arguments(kwargs: dict[str, object], error: type, words: str) -> None:
    args: dict[str, object] = {"client": SYNC, "name": "orders:1", "ttl": 1.0}
    args.update(kwargs)
    with pytest.raises(error, match=words):
        seawall.RWLock(**args)  # type: ignore[arg-type]
    with pytest.raises(error, match=words):
        seawall.aio.RWLock(**{**args, "client": ASYNC})  # type: ignore[arg-type]


def test_wrong_world_client_names_the_twin() -> None:
    with pytest.raises(TypeError, match=r"use seawall\.aio\.RWLock"):
        seawall.RWLock(ASYNC, "orders:1")
    with pytest.raises(TypeError, match=r"use seawall\.RWLock"):
        seawall.aio.RWLock(SYNC, "orders:1")


def test_bad_acquire_and_extend_arguments_name_the_lock() -> None:
    rw = seawall.RWLock(SYNC, "orders:1")
    # -1 is threading's "no timeout"; any other negative timeout is refused.
    with pytest.raises(ValueError, match="timeout of the read side of rwlock 'orders:1'"):
        rw.read().acquire(timeout=-2)
    with pytest.raises(ValueError, match=r"read side of rwlock 'orders:1'.*non-blocking"):
        rw.read().acquire(False, 1)
    with pytest.raises(ValueError, match="ttl of the write side of rwlock 'orders:1'"):
        rw.write().extend(ttl=0)
    with pytest.raises(seawall.LockError, match="'orders:1' has no fence yet"):
        _ = rw.write().fence
    with pytest.raises(seawall.LockNotOwnedError, match="'orders:1'"):
        rw.write().extend()
