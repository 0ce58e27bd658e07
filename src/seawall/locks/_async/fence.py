"""Fenced writes: a value that only a holder with a newer fence may overwrite.

A lock cannot stop a holder that was paused past its lease from writing late; the
resource must refuse it. `fenced_write` is that refusal for a value kept in Redis. For SQL,
the same rule is one statement:

    UPDATE accounts SET balance = :balance, fence = :fence
     WHERE id = :id AND fence < :fence

and a row count of 0 means a newer holder already wrote. Fences are large (a counter
starts from the server's clock in microseconds, docs/fences.md) but below 2^53: keep them
in a 64-bit column (BIGINT), never a 32-bit INT.
"""

from __future__ import annotations

from typing import Any

from seawall.shared import _scripts
from seawall.shared._async.scripts import run_script
from seawall.shared._validate import check_async_client, check_name

_FENCED_WRITE = _scripts.load("seawall.locks", "fenced_write")

# The script compares fences as Lua numbers (doubles): exact only below this.
_EXACT = 2**53


async def fenced_write(client: Any, key: str, value: Any, fence: int) -> bool:
    """Store `value` at `key` if `fence` is newer than the last accepted write's fence.

    Returns False (and changes nothing) when a write with an equal or newer fence was
    already accepted: the caller's hold is stale. `key` is a hash with fields "value"
    and "fence"; read it with `fenced_read`.
    """
    client = check_async_client(client, "fenced_write")
    check_name(key, "fenced_write key")
    if isinstance(fence, bool) or not isinstance(fence, int) or not 1 <= fence < _EXACT:
        raise ValueError(
            f"fence for {key!r} must be a positive int below 2**53 (lock.fence), got {fence!r}"
        )
    return bool(await run_script(client, _FENCED_WRITE, (key,), (fence, value)))


async def fenced_read(client: Any, key: str) -> tuple[Any, int]:
    """The value at `key` and the fence of the write that stored it ((None, 0) if none)."""
    client = check_async_client(client, "fenced_read")
    value, fence = await client.hmget(key, ["value", "fence"])
    return value, int(fence) if fence is not None else 0
