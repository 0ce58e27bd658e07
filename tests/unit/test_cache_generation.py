"""Entry names per namespace generation, and the clear message that announces one: no I/O."""

from __future__ import annotations

import itertools

from redis.crc import key_slot

from seawall.cache import _invalidation_message as fmt
from seawall.cache._codec import cache_keys, generation_key, parse_generation

SENDER = "0123456789abcdef0123456789abcdef"
# Every form _keys.tagged has: the usual one, a name with its own hash tag, one that
# starts with "}", and texts that mimic another form or a generation's marks.
NAMES = [("n", "k"), ("n", "{user1}:k"), ("}odd", "k"), ("a*b", "x:y}"), ("n", "@1/k"),
         ("n@1", "k"), ("n", "k:value"), ("{n}", "k")]  # fmt: skip
GENERATIONS = [0, 1, 35, 36, 1_718_000_000_000_000, 2**53 - 1]


def test_generation_zero_keeps_the_names_entries_always_had() -> None:
    keys = cache_keys("users", "42")
    assert keys == cache_keys("users", "42", 0)
    assert keys.value == "seawall:cache:{users:42}:value"
    assert keys.read == ("seawall:cache:{users:42}:value", "seawall:cache:{users:42}:hit")
    assert generation_key("users") == "seawall:cachegen:{users}"


def test_each_generation_has_its_own_names_in_the_same_slot() -> None:
    seen: dict[str, tuple[str, str, int]] = {}
    for (namespace, key), generation in itertools.product(NAMES, GENERATIONS):
        keys = cache_keys(namespace, key, generation)
        base = cache_keys(namespace, key)
        # One slot per entry whatever the generation: the scripts stay Cluster-safe, and
        # the version (not per generation) sits beside the entry.
        slots = {key_slot(name.encode()) for name in (*keys.all, keys.version, *base.all)}
        assert len(slots) == 1, (namespace, key, generation)
        assert keys.version == base.version
        for name in keys.all:
            assert name not in seen, (name, seen.get(name), (namespace, key, generation))
            seen[name] = (namespace, key, generation)
    assert cache_keys("n", "k", 36).value == "seawall:cache:@10/{n:k}:value"  # base 36


def test_clear_messages_carry_the_new_generation() -> None:
    cleared = fmt.cleared_channel("users")
    assert cleared == "seawall:cleared:users" and fmt.CLEARED_PATTERN == "seawall:cleared:*"
    body = fmt.encode(SENDER, fmt.CLEAR, "1718000000000001")
    message = fmt.decode(cleared, body.encode())
    assert message == fmt.Message("users", SENDER, "c", "1718000000000001")
    assert fmt.generation(message) == 1718000000000001
    # On the invalidation channel a clear empties the L1s only (warm()), whatever it says.
    for key in ("", "1718000000000001"):
        decoded = fmt.decode(fmt.channel("users"), fmt.encode(SENDER, fmt.CLEAR, key))
        assert decoded == fmt.Message("users", SENDER, "c", "")
        assert fmt.generation(decoded) is None
    # On the clear channel, anything but a clear naming a generation is unreadable (the
    # listener then clears every L1, as for any message it cannot read).
    for op, key in ((fmt.CLEAR, ""), (fmt.DISCARD, "42"), (fmt.CLEAR, "-1"), (fmt.CLEAR, "١")):
        assert fmt.decode(cleared, fmt.encode(SENDER, op, key)) is None


def test_generation_replies_are_parsed_whatever_the_client_decodes() -> None:
    assert parse_generation(None) == 0  # the key is absent: never cleared
    assert parse_generation(b"1718000000000001") == parse_generation("1718000000000001")
    assert parse_generation(b"junk") == 0


def test_second_delete_announcements_are_read_only_on_their_channel() -> None:
    sender = "0" * 32
    heard = fmt.decode(fmt.again_channel("users"), f"{sender}:a:1500")
    assert heard is not None and heard.namespace == "users" and fmt.due_in(heard) == 1.5
    assert fmt.decode(fmt.again_channel("users"), f"{sender}:a:soon") is None
    assert fmt.decode(fmt.again_channel("users"), f"{sender}:d:k") is None
    # An "a" on an invalidation or clear channel is not ours: unreadable (the L1s clear).
    assert fmt.decode(fmt.channel("users"), f"{sender}:a:1500") is None
    assert fmt.decode(fmt.cleared_channel("users"), f"{sender}:a:1500") is None
    assert fmt.due_in(fmt.decode(fmt.channel("users"), f"{sender}:d:k")) is None  # type: ignore[arg-type]
