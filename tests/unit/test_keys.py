import random

import pytest
from redis.crc import key_slot

from seawall.shared._keys import hash_tag, lock_keys, tagged


@pytest.mark.parametrize(
    ("key", "tag"),
    [
        ("plain", None),
        ("{user1}.following", "user1"),
        ("foo{}{bar}", None),
        ("foo{{bar}}zap", "{bar"),
        ("foo{bar}{zap}", "bar"),
        ("{x", None),
    ],
)
def test_hash_tag_follows_redis_rule(key: str, tag: str | None) -> None:
    assert hash_tag(key) == tag


def test_names_with_their_own_tag_keep_it() -> None:
    key = tagged("lock", "{order:42}:pay")
    assert key == "seawall:lock:#{order:42}:pay"
    assert key_slot(key.encode()) == key_slot(b"order:42")


@pytest.mark.parametrize("name", ["orders:42", "}x", "a}b", "{", "}", "{}", "x{}y", "ünï", " "])
def test_all_keys_of_a_lock_share_one_slot(name: str) -> None:
    keys = lock_keys(name)
    slots = {key_slot(keys.key.encode()), key_slot(keys.fence.encode())}
    assert len(slots) == 1, (name, keys)


def test_random_names_share_one_slot() -> None:
    rng = random.Random(7)
    alphabet = "ab{}:~ x"
    for _ in range(5000):
        name = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 8)))
        keys = lock_keys(name)
        assert key_slot(keys.key.encode()) == key_slot(keys.fence.encode()), name


def test_distinct_names_get_distinct_keys() -> None:
    names = ["a", "}a", "~}a", "{a}", "a}", "#{a}", "~{~}}a", "{~}}a", "#a"]
    assert len({lock_keys(n).key for n in names}) == len(names)
    rng = random.Random(11)
    alphabet = "a{}~#"
    seen: dict[str, str] = {}
    for _ in range(20000):
        name = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 6)))
        key = lock_keys(name).key
        assert seen.setdefault(key, name) == name, (key, name, seen[key])
