"""Names of the keys get_or_set's single flight keeps beside a Django cache key. No I/O.

A Django key is whatever KEY_FUNCTION makes (":1:user:42" by default). Its lease and its
set of waiters must sit in the same Redis Cluster slot, so that one script can read the
value and take the lease: their names carry a hash tag that hashes like the key itself.

- A key without braces hashes whole: "{<key>}" hashes the same.
- A key with a hash tag of its own ("{user:42}:profile") is kept whole after a prefix
  without braces, so its own tag is still the first one.
- Anything else (a "}" before any "{", an empty "{}"): the key hashes whole, but wrapping it
  in braces would end the tag early; the names then carry a short tag found to hash to
  the key's slot (searched once per slot, a few milliseconds).
"""

from __future__ import annotations

import functools
import itertools

from redis.crc import key_slot

from seawall.shared._keys import PREFIX, hash_tag

LEASE = f"{PREFIX}:django:lease:"
WAITERS = f"{PREFIX}:django:waiters:"
STALE = f"{PREFIX}:django:stale:"


def _tagged(key: str) -> str:
    if "{" not in key and "}" not in key:
        return f"{{{key}}}"
    if hash_tag(key) is not None:
        return key
    return f"{{{_tag_of_slot(key_slot(key.encode()))}}}{key}"


@functools.lru_cache(maxsize=1024)
def _tag_of_slot(slot: int) -> str:
    """The shortest decimal number whose CRC16 slot is `slot`."""
    for number in itertools.count():
        text = str(number)
        if key_slot(text.encode()) == slot:
            return text
    raise AssertionError("unreachable")  # pragma: no cover


def flight_keys(key: str) -> tuple[str, str, str]:
    """(value, lease, waiters) of Django key `key`; the three share one slot."""
    tagged = _tagged(key)
    return key, LEASE + tagged, WAITERS + tagged


def stale_key(key: str) -> str:
    """The stale copy of Django key `key` (OPTIONS stale_ttl), in the key's slot."""
    return STALE + _tagged(key)
