"""A changed row's key as cache key text, per type (pure)."""

from __future__ import annotations

import datetime
import decimal
import uuid

import pytest

from seawall.cdc._keys import Unkeyable, key_text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (42, "42"),
        ("ann", "ann"),
        (b"abc", "abc"),
        (decimal.Decimal("12.50"), "12.50"),
        (1.5, "1.5"),
        (datetime.date(2024, 1, 2), "2024-01-02"),
        (datetime.datetime(2024, 1, 2, 3, 4, 5), "2024-01-02 03:04:05"),
        (datetime.timedelta(hours=1, minutes=2, seconds=3), "01:02:03"),
        (datetime.timedelta(hours=-1), "-01:00:00"),
        (datetime.time(1, 2, 3), "01:02:03"),
        (uuid.UUID(int=1), "00000000-0000-0000-0000-000000000001"),
    ],
)
def test_each_type_keys_as_its_text(value: object, text: str) -> None:
    assert key_text(value, "ns") == text


@pytest.mark.parametrize("value", [b"\xff\x00", {"a", "b"}, True, [1]])
def test_values_that_key_nothing_are_unkeyable(value: object) -> None:
    with pytest.raises(Unkeyable):
        key_text(value, "ns")
