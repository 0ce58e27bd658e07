"""What a follower reports about itself: `Follower.status()`, the status lines and the
`--json` lines of `seawall follow`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class FollowerStatus:
    """What `Follower.status()` and the `--json` lines report."""

    source: str
    leader: bool
    streaming: bool  # elected and reading the log
    position: str | None  # the last checkpointed position
    # The age of the oldest change read and not yet invalidated (its commit to now), or,
    # with none waiting, the commit-to-invalidated delay of the last transaction of the
    # interval; 0 when idle.
    lag_seconds: float
    events_per_second: float  # row changes over the last status interval
    row_changes: int  # since start
    invalidated: int  # cache keys voided since start (after de-duplication per batch)

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "leader": self.leader,
            "streaming": self.streaming,
            "position": self.position,
            "lag_seconds": round(self.lag_seconds, 6),
            "events_per_second": round(self.events_per_second, 1),
            "row_changes": self.row_changes,
            "invalidated": self.invalidated,
        }
