"""Bloom filter sizing, item encoding and bit positions, without a server."""

import math
import random
import struct

import pytest

from seawall.bloom import _arithmetic


@pytest.mark.parametrize("capacity", [1, 10, 1_000, 100_000, 10_000_000])
@pytest.mark.parametrize("error_rate", [0.9999, 0.5, 0.1, 0.01, 0.001, 1e-6])
def test_sizing_meets_the_rate_with_little_waste(capacity: int, error_rate: float) -> None:
    sizing = _arithmetic.size(capacity, error_rate)
    assert sizing.expected_error_rate(capacity) <= error_rate
    optimum = -capacity * math.log(error_rate) / math.log(2) ** 2
    if sizing.hashes == 1:  # rates near 1: the optimum wants less than one hash
        optimum = -capacity / math.log1p(-error_rate)
    # Never more than 3% (or, for tiny filters, 2 bits) over the optimum.
    assert sizing.bits <= max(optimum * 1.03, optimum + 2)
    assert sizing.hashes == max(1, round(sizing.bits / capacity * math.log(2)))


def test_known_sizing() -> None:
    sizing = _arithmetic.size(100_000, 0.01)
    assert (sizing.bits, sizing.hashes) == (959_361, 7)
    assert sizing.bytes == 119_921
    assert sizing.signature == "b2e1:959361:7"


@pytest.mark.parametrize(
    ("capacity", "error_rate", "error", "words"),
    [
        (0, 0.01, ValueError, "capacity of Bloom filter 'f' must be >= 1, got 0"),
        (-5, 0.01, ValueError, "must be >= 1"),
        (10.0, 0.01, TypeError, "capacity of Bloom filter 'f' must be an int"),
        (True, 0.01, TypeError, "must be an int"),
        (10, 0, ValueError, "strictly between 0 and 1"),
        (10, 1, ValueError, "strictly between 0 and 1"),
        (10, 1.5, ValueError, "strictly between 0 and 1"),
        (10, math.nan, ValueError, "strictly between 0 and 1"),
        (10, "1%", TypeError, "error_rate of Bloom filter 'f' must be a float"),
        (10**9, 1e-9, ValueError, "more than one Redis string holds"),
    ],
)
def test_bad_sizing_is_refused(
    capacity: object, error_rate: object, error: type, words: str
) -> None:
    with pytest.raises(error, match=words):
        _arithmetic.size(capacity, error_rate, "f")  # type: ignore[arg-type]


def test_largest_filter_fits_one_string() -> None:
    sizing = _arithmetic.size(400_000_000, 0.01)  # about 457 MiB
    assert sizing.bits <= _arithmetic.MAX_BITS


def test_items_are_encoded_as_redis_would() -> None:
    assert _arithmetic.encode_item(42, "f") == _arithmetic.encode_item("42", "f") == b"42"
    assert _arithmetic.encode_item(b"\xff", "f") == b"\xff"
    assert _arithmetic.encode_item("é", "f") == "é".encode()
    assert _arithmetic.encode_item(bytearray(b"ab"), "f") == b"ab"
    for bad in (1.5, None, True, ("a",), object()):
        with pytest.raises(TypeError, match="items of Bloom filter 'f' must be str, bytes or int"):
            _arithmetic.encode_item(bad, "f")


def test_positions_are_in_range_and_deterministic() -> None:
    sizing = _arithmetic.size(1_000, 0.01)
    for i in range(2_000):
        found = _arithmetic.positions(str(i).encode(), sizing)
        assert len(found) == sizing.hashes
        assert all(0 <= p < sizing.bits for p in found)
        assert found == _arithmetic.positions(str(i).encode(), sizing)
        assert found[0] == _arithmetic.start(str(i).encode(), sizing)[0]
    packed = _arithmetic.pack_starts([b"a", b"b"], sizing)
    assert struct.unpack("<4I", packed) == (
        *_arithmetic.start(b"a", sizing),
        *_arithmetic.start(b"b", sizing),
    )


def test_false_positive_rate_of_the_positions_matches_theory() -> None:
    # The whole filter in memory: the hashing scheme alone keeps to the rate.
    sizing = _arithmetic.size(10_000, 0.01)
    bits = bytearray(sizing.bytes)
    for i in range(10_000):
        for p in _arithmetic.positions(f"in{i}".encode(), sizing):
            bits[p >> 3] |= 1 << (p & 7)

    def present(data: bytes) -> bool:
        return all(bits[p >> 3] >> (p & 7) & 1 for p in _arithmetic.positions(data, sizing))

    assert all(present(f"in{i}".encode()) for i in range(10_000))
    rng = random.Random(7)
    false = sum(present(rng.randbytes(12)) for _ in range(30_000))
    assert 0.007 <= false / 30_000 <= 0.011


def test_batches_keep_order_and_size() -> None:
    assert list(_arithmetic.batches(range(7), 3)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(_arithmetic.batches([], 3)) == []
