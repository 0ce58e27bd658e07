"""The wake-up message a cache write-back publishes (see cache_store.lua), parsed without I/O."""

from __future__ import annotations

import pytest

from seawall.cache._async.waker import parse_wake


def message(key: str, rest: bytes = b"") -> bytes:
    raw = key.encode()
    return str(len(raw)).encode() + b":" + raw + rest


def test_a_give_back_or_delete_names_only_the_key() -> None:
    assert parse_wake(message("seawall:cache:{users:42}")) == ("seawall:cache:{users:42}", None)


def test_a_write_back_carries_token_fresh_time_and_payload() -> None:
    key = "seawall:cache:{ns:a:b\nc é}"  # colons, a newline and non-ASCII in the key
    payload = b'{"a":"x:y:z"}\x00\xff'  # colons and any bytes in the payload
    found = parse_wake(message(key, b"ab12cd:1500:" + payload))
    assert found == (key, (b"ab12cd", 1500, payload))


def test_an_absent_value_is_an_empty_payload() -> None:
    assert parse_wake(message("k", b"t0:30000:")) == ("k", (b"t0", 30000, b""))


def test_a_decoded_message_is_read_as_utf8() -> None:
    key = "seawall:cache:{é}"
    text = message(key, b"tok:10:" + '{"v":"é"}'.encode()).decode()
    assert parse_wake(text) == (key, (b"tok", 10, '{"v":"é"}'.encode()))


@pytest.mark.parametrize("raw", [b"", b"nonsense", b"5:abc", b"1:kno-colons"])
def test_malformed_messages_raise_value_error(raw: bytes) -> None:
    with pytest.raises(ValueError):
        parse_wake(raw)
