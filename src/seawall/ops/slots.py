"""Redis Cluster hash slots, computed locally: CRC16 (XMODEM: polynomial 0x1021, initial
value 0) of the key's hash tag, modulo 16384.

The hash tag is the part between the first `{` and the first `}` after it, when that part
is not empty; otherwise the whole key is hashed. So `user:{42}:cart` and `{42}` share a
slot, while `{}x` hashes whole.
"""

from __future__ import annotations

__all__ = ["SLOTS", "hash_tag", "key_slot"]

SLOTS = 16384


def _table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
        table.append(crc & 0xFFFF)
    return table


_TABLE = _table()


def crc16(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc = ((crc << 8) & 0xFFFF) ^ _TABLE[((crc >> 8) ^ byte) & 0xFF]
    return crc


def hash_tag(key: bytes) -> bytes | None:
    """The part of `key` that is hashed when it has a non-empty `{...}`; else None."""
    start = key.find(b"{")
    if start < 0:
        return None
    end = key.find(b"}", start + 1)
    if end < 0 or end == start + 1:
        return None
    return key[start + 1 : end]


def key_slot(key: bytes | str) -> int:
    data = key.encode() if isinstance(key, str) else key
    tag = hash_tag(data)
    return crc16(data if tag is None else tag) % SLOTS
