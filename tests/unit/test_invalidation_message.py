"""The invalidation message format that listeners and the cache's scripts share."""

from seawall.cache import _invalidation_message as fmt

SENDER = "0123456789abcdef0123456789abcdef"


def test_round_trip_keeps_keys_with_colons_and_unicode() -> None:
    for key in ("k", "users:42:profile", "é:ü", ""):
        body = fmt.encode(SENDER, fmt.DISCARD, key)
        assert fmt.decode(fmt.channel("users"), body.encode()) == fmt.Message(
            "users", SENDER, "d", key
        )
    clear = fmt.encode(SENDER, fmt.CLEAR)
    assert fmt.decode(b"seawall:inval:a:b", clear) == fmt.Message("a:b", SENDER, "c", "")


def test_channel_and_pattern() -> None:
    assert fmt.channel("users") == "seawall:inval:users"
    assert fmt.PATTERN == "seawall:inval:*"


def test_malformed_messages_are_recognised() -> None:
    channel = fmt.channel("users")
    for body in (
        b"",
        b"nonsense",
        b"abc:d:key",
        f"{SENDER}:x:key".encode(),
        f"{SENDER}".encode(),
        f"{SENDER}:d".encode(),
        b"\xff\xfe",
    ):
        assert fmt.decode(channel, body) is None, body
    assert fmt.decode(b"other:users", fmt.encode(SENDER, "d", "k")) is None


def test_one_message_drops_many_keys() -> None:
    keys = ["k", "users:42:profile", "é:ü", "", "9:x", "a" * 300]
    body = fmt.encode_many(SENDER, keys)
    assert body.startswith(f"{SENDER}:m:")
    assert fmt.decode(fmt.channel("users"), body.encode()) == fmt.Message(
        "users", SENDER, "m", "", tuple(keys)
    )
    # A single key goes as "d", which every listener, old or new, reads.
    assert fmt.encode_many(SENDER, ["k:1"]) == fmt.encode(SENDER, fmt.DISCARD, "k:1")


def test_malformed_many_key_messages_are_recognised() -> None:
    channel = fmt.channel("users")
    for tail in ("x", "3:ab", "2:ab3", "-1:a", "1", "²:a", "1:a:"):
        assert fmt.decode(channel, f"{SENDER}:m:{tail}") is None, tail
    # On the clear channel only a clear is read.
    assert fmt.decode(fmt.cleared_channel("users"), fmt.encode_many(SENDER, ["a", "b"])) is None
