"""Bloom filter arithmetic: sizing, item encoding and bit positions. No I/O.

Sizing follows the textbook optimum (m = -n ln p / ln(2)^2 bits, k = m/n ln 2 hashes),
then grows m until the expected false positive rate with a whole number of hashes,
(1 - e^(-k n / m))^k, is at most the rate asked for: rounding k alone can push it above.

Positions use enhanced double hashing (Dillinger and Manolios) over one BLAKE2b digest
split into two 64-bit halves: k positions for the price of one strong hash, with no
measurable loss of accuracy against k independent hashes.
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# A Redis string holds at most 512 MB, so SETBIT offsets stop at 2^32 - 1.
MAX_BITS = 512 * 1024 * 1024 * 8

# Bumped whenever positions for the same item and sizing would change: a filter written by
# one scheme must not be read with another (the scripts check it, see `Sizing.signature`).
SCHEME = "b2e1"

_LOW64 = (1 << 64) - 1


@dataclass(frozen=True, slots=True)
class Sizing:
    capacity: int
    error_rate: float
    bits: int  # m
    hashes: int  # k

    @property
    def bytes(self) -> int:
        return (self.bits + 7) // 8

    @property
    def signature(self) -> str:
        """Stored beside the bitmap: a filter of another size or scheme is refused."""
        return f"{SCHEME}:{self.bits}:{self.hashes}"

    def expected_error_rate(self, items: int) -> float:
        """The false positive rate expected once `items` distinct items are in the filter."""
        return expected_error_rate(self.bits, self.hashes, items)


def expected_error_rate(bits: int, hashes: int, items: int) -> float:
    if items <= 0:
        return 0.0
    return float((-math.expm1(-hashes * items / bits)) ** hashes)


def check_capacity(capacity: Any, name: str) -> int:
    if isinstance(capacity, bool) or not isinstance(capacity, int):
        raise TypeError(
            f"capacity of Bloom filter {name!r} must be an int (the number of items it is "
            f"sized for), got {type(capacity).__qualname__}: {capacity!r}"
        )
    if capacity < 1:
        raise ValueError(f"capacity of Bloom filter {name!r} must be >= 1, got {capacity}")
    return capacity


def check_error_rate(error_rate: Any, name: str) -> float:
    if isinstance(error_rate, bool) or not isinstance(error_rate, int | float):
        raise TypeError(
            f"error_rate of Bloom filter {name!r} must be a float in (0, 1), e.g. 0.01 for 1%; "
            f"got {type(error_rate).__qualname__}: {error_rate!r}"
        )
    if not 0.0 < error_rate < 1.0:
        raise ValueError(
            f"error_rate of Bloom filter {name!r} must be strictly between 0 and 1 "
            f"(0.01 means 1% false positives), got {error_rate!r}"
        )
    return float(error_rate)


def size(capacity: int, error_rate: float, name: str = "?") -> Sizing:
    """The smallest (m, k) whose expected false positive rate at `capacity` is <= error_rate."""
    capacity = check_capacity(capacity, name)
    error_rate = check_error_rate(error_rate, name)
    ln2 = math.log(2)
    bits = max(1, math.ceil(-capacity * math.log(error_rate) / (ln2 * ln2)))
    if round(bits / capacity * ln2) < 1:
        # Rates near 1 want less than one hash; with one, the rate is 1 - e^(-n/m): solve.
        bits = max(1, math.ceil(-capacity / math.log1p(-error_rate)))
    while True:
        hashes = max(1, round(bits / capacity * ln2))
        rate = expected_error_rate(bits, hashes, capacity)
        if rate <= error_rate:
            break
        # A few steps of 0.01 %: the optimum is within a rounding of k.
        bits += max(1, bits // 10_000)
    if bits > MAX_BITS:
        raise ValueError(
            f"Bloom filter {name!r} would need {bits:,} bits ({bits / 8 / 2**20:,.0f} MiB) for "
            f"capacity {capacity:,} at error_rate {error_rate}, more than one Redis string "
            f"holds (512 MiB): lower the capacity, raise the error_rate, or split the items "
            f"over several filters"
        )
    return Sizing(capacity, error_rate, bits, hashes)


def encode_item(item: Any, name: str) -> bytes:
    """The bytes an item is hashed as; like Redis itself, 42, "42" and b"42" are one item."""
    kind = type(item)
    if kind is str:
        return item.encode("utf-8", "surrogatepass")  # type: ignore[no-any-return]
    if kind is bytes:
        return item  # type: ignore[no-any-return]
    if isinstance(item, str):
        return str(item).encode("utf-8", "surrogatepass")
    if isinstance(item, bytes | bytearray | memoryview):
        return bytes(item)
    if isinstance(item, int) and not isinstance(item, bool):
        return str(int(item)).encode()
    raise TypeError(
        f"items of Bloom filter {name!r} must be str, bytes or int, got "
        f"{type(item).__qualname__}: {item!r}; convert it to one of those first"
    )


def start(data: bytes, sizing: Sizing) -> tuple[int, int]:
    """An item's first offset and first step: the two halves of its digest, mod m.

    The scripts walk the remaining offsets from these two numbers (see `positions`), so a
    batch carries 2 numbers per item instead of k.
    """
    whole = int.from_bytes(hashlib.blake2b(data, digest_size=16).digest(), "little")
    return (whole & _LOW64) % sizing.bits, (whole >> 64) % sizing.bits


def pack_starts(encoded: Iterable[bytes], sizing: Sizing) -> bytes:
    """`start` of each item as little-endian uint32 pairs: one script argument per batch.

    m <= 2^32 (MAX_BITS), so every offset and step fits in 32 bits; one binary argument
    costs far less to send and parse than two decimal numbers per item.
    """
    bits = sizing.bits
    blake2b = hashlib.blake2b
    flat: list[int] = []
    for data in encoded:
        whole = int.from_bytes(blake2b(data, digest_size=16).digest(), "little")
        flat.append((whole & _LOW64) % bits)
        flat.append((whole >> 64) % bits)
    return struct.pack(f"<{len(flat)}I", *flat)


def positions(data: bytes, sizing: Sizing) -> list[int]:
    """The k bit offsets of one encoded item, as bloom_add.lua and bloom_check.lua walk them."""
    x, y = start(data, sizing)
    bits = sizing.bits
    found = []
    for i in range(1, sizing.hashes + 1):
        found.append(x)
        # Enhanced double hashing: the growing step (a cubic term overall) keeps positions
        # apart even when y is 0 or shares a factor with m.
        x = (x + y) % bits
        y = (y + i) % bits
    return found


def batches(items: Iterable[Any], size: int) -> Iterable[list[Any]]:
    """`items` in lists of at most `size`, in order."""
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
