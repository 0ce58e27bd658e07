"""A changed row's key as the cache's key text (pure).

`seawall.Cache` keys an int in decimal, a str as it is and bytes as UTF-8 text; the
follower keys a column value the same way, and every other type by the text an
application gets when it turns the value into a key with `str()`, which is also the
database's own text form:

| value | key text | e.g. |
| --- | --- | --- |
| int (not bool) | decimal | 42 -> "42" |
| str | as is | "ann" |
| bytes | UTF-8 text, as Cache keys bytes | b"abc" -> "abc" |
| Decimal | str(): the digits as stored | Decimal("12.50") -> "12.50" |
| float | repr() | 1.5 -> "1.5" |
| date, datetime | str(): ISO with a space | "2024-01-02", "2024-01-02 03:04:05" |
| time, timedelta (TIME) | HH:MM:SS[.ffffff] | "01:02:03" |
| uuid.UUID | str() | "0b7e...-..." |

PostgreSQL sends every value as text already (integers are made int), so only MariaDB's
decoded values meet the other rows. A value outside the table (bytes that are not UTF-8,
a SET, a JSON document) is Unkeyable: the follower cannot name its cache entry, so it
clears the namespace instead (and says so).
"""

from __future__ import annotations

import datetime
import decimal
import uuid
from typing import Any

from seawall.cache._codec import cache_key

__all__ = ["Unkeyable", "key_text"]


class Unkeyable(ValueError):
    """A key value with no cache key text; the message says why."""


def key_text(value: Any, namespace: str) -> str:
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        return cache_key(value, namespace)
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError:
            raise Unkeyable(f"bytes that are not UTF-8 ({value[:16].hex()}...)") from None
    if isinstance(value, (decimal.Decimal, datetime.date, uuid.UUID)):
        return str(value)  # datetime is a date: str() gives "2024-01-02 03:04:05"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, datetime.timedelta):
        return _clock(value)
    if isinstance(value, datetime.time):
        return value.isoformat()
    raise Unkeyable(f"a {type(value).__qualname__} value")


def _clock(value: datetime.timedelta) -> str:
    micros = value.days * 86_400_000_000 + value.seconds * 1_000_000 + value.microseconds
    sign = "-" if micros < 0 else ""
    seconds, fraction = divmod(abs(micros), 1_000_000)
    hours, rest = divmod(seconds, 3600)
    text = f"{sign}{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"
    return f"{text}.{fraction:06d}" if fraction else text
