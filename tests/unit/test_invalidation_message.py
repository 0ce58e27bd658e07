"""The invalidation message format that listeners and the cache's scripts share."""

from seawall import _invalidation_message as fmt

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
