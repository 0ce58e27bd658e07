"""Warnings the follower gives once per cause, then at most once a minute (pure).

A follower may meet the same problem on every transaction (a table truncated in a loop,
a session logging statements, a value that cannot key the cache): one line per cause
says it without flooding the log, and a later line counts what was left unsaid. Causes
are kept apart, so a harmless one (a legitimate NULL key) never hides another.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Notices"]

REPEAT_AFTER = 60.0


@dataclass(slots=True)
class Notices:
    """`notice(cause, text)` returns the line to log now, or None (said recently)."""

    repeat_after: float = REPEAT_AFTER
    clock: Callable[[], float] = time.monotonic
    _said: dict[str, tuple[float, int]] = field(default_factory=dict)  # cause -> (at, muted)

    def notice(self, cause: str, text: str) -> str | None:
        now = self.clock()
        said = self._said.get(cause)
        if said is not None and now - said[0] < self.repeat_after:
            self._said[cause] = (said[0], said[1] + 1)
            return None
        self._said[cause] = (now, 0)
        if said is not None and said[1]:
            return f"{text} ({said[1]} more times since it was last said)"
        return text
