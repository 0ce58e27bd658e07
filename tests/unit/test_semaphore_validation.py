"""Bad semaphore arguments fail at construction, naming the semaphore."""

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
        ({"value": 0}, ValueError, "value of semaphore 'pool:db' must be at least 1"),
        ({"value": -3}, ValueError, "value of semaphore 'pool:db' must be at least 1"),
        ({"value": 2.0}, TypeError, "value of semaphore 'pool:db' must be an int"),
        ({"value": "3"}, TypeError, "value of semaphore 'pool:db' must be an int"),
        ({"value": True}, TypeError, "value of semaphore 'pool:db' must be an int"),
        ({"value": None}, TypeError, "value of semaphore 'pool:db' must be an int"),
        ({"ttl": 0}, ValueError, "ttl of semaphore 'pool:db' must be .* >= 0.001"),
        ({"ttl": -1.0}, ValueError, "ttl of semaphore 'pool:db' must be .* >= 0.001"),
        ({"ttl": math.nan}, ValueError, "ttl of semaphore 'pool:db' must be a finite"),
        ({"ttl": "30"}, TypeError, "ttl of semaphore 'pool:db' must be a number"),
        ({"timeout": -1}, ValueError, "timeout of semaphore 'pool:db'"),
        ({"on_lost": 3}, TypeError, "on_lost of semaphore 'pool:db' must be callable"),
        ({"name": ""}, ValueError, "Semaphore name must not be empty"),
        ({"name": 7}, TypeError, "Semaphore name must be a str"),
    ],
)
def test_bad_semaphore_arguments(kwargs: dict[str, object], error: type, words: str) -> None:
    args: dict[str, object] = {"client": SYNC, "name": "pool:db", "value": 3, "ttl": 1.0}
    args.update(kwargs)
    with pytest.raises(error, match=words):
        seawall.Semaphore(**args)  # type: ignore[arg-type]
    with pytest.raises(error, match=words):
        seawall.aio.Semaphore(**{**args, "client": ASYNC})  # type: ignore[arg-type]


def test_client_of_the_other_world_is_named() -> None:
    with pytest.raises(TypeError, match=r"use seawall\.aio\.Semaphore"):
        seawall.Semaphore(ASYNC, "x")
    with pytest.raises(TypeError, match=r"use seawall\.Semaphore with sync clients"):
        seawall.aio.Semaphore(SYNC, "x")


def test_defaults_follow_the_contract() -> None:
    sem = seawall.Semaphore(SYNC, "pool:db")
    assert (sem.value, sem.ttl, sem.timeout) == (3, 30.0, None)
    assert sem.key == "seawall:semaphore:{pool:db}"


@pytest.mark.parametrize("name", ["pool", "{orders}:reports", "}odd", "a:b:c"])
def test_semaphore_keys_share_one_slot_and_name_their_kind(name: str) -> None:
    from seawall.shared._keys import hash_tag, kind_of, semaphore_keys

    keys = semaphore_keys(name)
    tags = {hash_tag(k) for k in (keys.key, keys.fence, keys.waiters, keys.seen)}
    assert len(tags) == 1 and None not in tags
    assert kind_of(keys.key) == "semaphore"
    assert kind_of("seawall:lock:{x}") == "lock"
    assert kind_of("other:thing") == ""
