"""Bad input fails at construction with a message that says what was expected."""

import math

import pytest
import redis
import redis.asyncio

import seawall
import seawall.aio

SYNC = redis.Redis(port=1)  # never connects: construction does no I/O
ASYNC = redis.asyncio.Redis(port=1)


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"name": ""}, ValueError, "must not be empty"),
        ({"name": None}, TypeError, "name must be a str"),
        ({"name": b"x"}, TypeError, "name must be a str"),
        ({"ttl": 0}, ValueError, ">= 0.001"),
        ({"ttl": -1.0}, ValueError, ">= 0.001"),
        ({"ttl": math.nan}, ValueError, "finite"),
        ({"ttl": math.inf}, ValueError, "finite"),
        ({"ttl": 3e12}, ValueError, "<= 1e\\+09"),
        ({"ttl": "30"}, TypeError, "number of seconds"),
        ({"ttl": True}, TypeError, "number of seconds"),
        ({"timeout": -1}, ValueError, "timeout"),
        ({"timeout": "1"}, TypeError, "timeout"),
        ({"on_lost": 3}, TypeError, "callable"),
    ],
)
def test_bad_lock_arguments(kwargs: dict[str, object], error: type, words: str) -> None:
    args: dict[str, object] = {"client": SYNC, "name": "orders:1", "ttl": 1.0}
    args.update(kwargs)
    with pytest.raises(error, match=words):
        seawall.Lock(**args)  # type: ignore[arg-type]
    with pytest.raises(error, match=words):
        seawall.aio.Lock(**{**args, "client": ASYNC})  # type: ignore[arg-type]


def test_messages_name_the_lock() -> None:
    with pytest.raises(ValueError, match="'orders:1'"):
        seawall.Lock(SYNC, "orders:1", ttl=0)


@pytest.mark.parametrize("thing", [None, "redis://localhost", object(), 42])
def test_not_a_client(thing: object) -> None:
    with pytest.raises(TypeError, match="redis-py client"):
        seawall.Lock(thing, "x")
    with pytest.raises(TypeError, match="redis-py asyncio client"):
        seawall.aio.Lock(thing, "x")


def test_client_of_the_other_world_is_named() -> None:
    with pytest.raises(TypeError, match=r"use seawall\.aio\.Lock"):
        seawall.Lock(ASYNC, "x")
    with pytest.raises(TypeError, match=r"use seawall\.Lock with sync clients"):
        seawall.aio.Lock(SYNC, "x")


def test_fence_before_acquire_is_a_clear_error() -> None:
    with pytest.raises(seawall.LockError, match="acquire it first"):
        _ = seawall.Lock(SYNC, "x").fence


def test_release_without_acquire() -> None:
    with pytest.raises(seawall.LockNotOwnedError, match="never acquired"):
        seawall.Lock(SYNC, "x").release()
