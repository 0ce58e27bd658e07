"""The per-statement switch: `select(User).options(cached())`."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm.interfaces import UserDefinedOption

from seawall.shared._validate import check_seconds


class cached(UserDefinedOption):  # reads as a loader option: options(cached())
    """Serve this SELECT (or session.get) from the attached QueryCache.

    `ttl` (seconds) overrides the QueryCache's ttl for this statement's results. The option
    is not passed on to lazy loads or refreshes the result triggers later: those read the
    database as usual.
    """

    propagate_to_loaders = False

    def __init__(self, ttl: float | None = None) -> None:
        super().__init__(None if ttl is None else check_seconds(ttl, "ttl of cached()"))

    @property
    def ttl(self) -> float | None:
        value: Any = self.payload
        return None if value is None else float(value)

    def __repr__(self) -> str:
        return f"cached(ttl={self.ttl})"


def find_cached(options: Any) -> cached | None:
    for option in options:
        if isinstance(option, cached):
            return option
    return None
