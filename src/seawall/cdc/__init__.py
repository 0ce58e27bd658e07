"""Cache invalidation from the database's own change log (`seawall follow`).

A follower reads a source's log (PostgreSQL logical decoding, the MariaDB/MySQL row
binlog), invalidates the cache entries of every changed row, and checkpoints its position
in Redis only after the invalidations before it are done, at transaction boundaries.

    follower = seawall.cdc.Follower("postgresql://seawall@db/shop", r, ["users=users"])
    follower.run()        # blocks; follower.stop() from another thread ends it
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from seawall.cdc._events import (
    Event,
    LogGap,
    RowChange,
    Source,
    SourceError,
    TableReset,
    TxEnd,
)
from seawall.cdc._follower import Follower
from seawall.cdc._mapping import MapError, TableMap, parse_map
from seawall.cdc._sources import open_source
from seawall.cdc._status import FollowerStatus

__all__ = [
    "Event",
    "Follower",
    "FollowerStatus",
    "LogGap",
    "MapError",
    "RowChange",
    "Source",
    "SourceError",
    "TableMap",
    "TableReset",
    "TxEnd",
    "follow",
    "open_source",
    "parse_map",
]


def follow(
    source: str | Source,
    redis: Any,
    maps: Sequence[str | TableMap],
    *,
    ttl: float = 10.0,
    status_interval: float = 10.0,
    on_status: Callable[[FollowerStatus], None] | None = None,
    on_invalidated: Callable[[list[tuple[str, str]]], None] | None = None,
    on_gap: Literal["clear", "stop"] = "clear",
    on_cleared: Callable[[list[str]], None] | None = None,
) -> None:
    """Follow `source` until interrupted (Ctrl-C): `Follower(...).run()` in one call."""
    follower = Follower(
        source,
        redis,
        maps,
        ttl=ttl,
        status_interval=status_interval,
        on_status=on_status,
        on_invalidated=on_invalidated,
        on_gap=on_gap,
        on_cleared=on_cleared,
    )
    try:
        follower.run()
    finally:
        follower.stop()
