"""Redlock arithmetic: quorum, clock drift, validity, retry delays, fences. No I/O.

The algorithm (one attempt): note the monotonic time, ask every master to SET the key with
the ttl, wait for the replies (each bounded by a per-node timeout), then

    validity = ttl - elapsed - drift,   drift = ttl * CLOCK_DRIFT_FACTOR + DRIFT_FLOOR

and the attempt succeeds only if a majority granted it and the validity is positive. The
keys on the masters live at least `validity` more seconds even if the masters' clocks run
up to 1 % fast; past it, another client may hold the lock.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Masters' clocks may run this much faster than ours (1 %), plus a fixed 2 ms for the
# granularity of key expiry (Redis checks expiry in whole milliseconds).
CLOCK_DRIFT_FACTOR = 0.01
DRIFT_FLOOR = 0.002

# Default per-node timeout: a small fraction of the ttl, so a dead master costs little of
# the validity, within bounds that suit a local network (and a busy client machine).
NODE_TIMEOUT_FRACTION = 0.01
MIN_NODE_TIMEOUT = 0.05
MAX_NODE_TIMEOUT = 0.5
# ... and never more than this share of the ttl (short ttls in tests).
MAX_NODE_TIMEOUT_SHARE = 0.1

# Default upper bound of the random delay between attempts.
RETRY_DELAY = 0.2
# A retry waits at least this fraction of the bound, so retries never come back to back.
MIN_RETRY_SHARE = 0.1


def quorum(masters: int) -> int:
    """How many masters must grant a lock: a strict majority."""
    return masters // 2 + 1


def drift(ttl: float) -> float:
    """How much of the ttl is lost to clock drift between us and the masters."""
    return ttl * CLOCK_DRIFT_FACTOR + DRIFT_FLOOR


def validity(ttl: float, started: float, now: float) -> float:
    """Seconds left of a hold whose requests were sent at `started`, seen at `now`.

    Counted from the send: each master started its ttl at some point after `started`, so
    the keys live at least this long (if their clocks run at most 1 % fast).
    """
    return ttl - (now - started) - drift(ttl)


def deadline(ttl: float, started: float) -> float:
    """The monotonic time at which the validity of a hold sent at `started` reaches 0."""
    return started + ttl - drift(ttl)


def default_node_timeout(ttl: float) -> float:
    """The per-node timeout used when none is given: 1 % of the ttl, 50-500 ms, and at
    most a tenth of the ttl."""
    wanted = min(max(ttl * NODE_TIMEOUT_FRACTION, MIN_NODE_TIMEOUT), MAX_NODE_TIMEOUT)
    return min(wanted, ttl * MAX_NODE_TIMEOUT_SHARE)


def retry_delay(bound: float, rng: random.Random | None = None) -> float:
    """A random delay before the next attempt, in [bound/10, bound].

    Random, so clients that split the votes between them do not collide again.
    """
    draw = (rng or random).random()
    return bound * (MIN_RETRY_SHARE + (1 - MIN_RETRY_SHARE) * draw)


@dataclass(frozen=True, slots=True)
class Tally:
    """What one round of requests to the masters achieved."""

    granted: int  # masters that granted (or extended) the lock
    masters: int
    validity: float  # seconds left, measured after the last reply

    @property
    def quorum(self) -> int:
        return quorum(self.masters)

    @property
    def success(self) -> bool:
        return self.granted >= self.quorum and self.validity > 0


@dataclass(frozen=True, slots=True)
class FencePlan:
    """The fence of a hold, and which granting masters must be raised to it.

    A hold's fence is the highest counter among the masters that granted it. It is larger
    than every earlier hold's fence only if a majority of masters have a counter at least
    this high while the hold is valid: any later majority then meets one of them, and its
    INCR there goes past the fence. Masters that granted with a lower counter are raised
    (one more round trip), which is needed only when the counters have drifted apart.
    """

    fence: int
    at_fence: int  # granting masters whose counter already equals the fence
    to_raise: tuple[int, ...]  # indexes of granting masters whose counter is lower


def plan_fence(counters: Sequence[int | None], masters: int) -> FencePlan:
    """`counters[i]` is master i's counter after granting, or None if it did not grant."""
    granted = [(i, c) for i, c in enumerate(counters) if c is not None]
    fence = max((c for _, c in granted), default=0)
    at_fence = sum(1 for _, c in granted if c == fence)
    to_raise = () if at_fence >= quorum(masters) else tuple(i for i, c in granted if c < fence)
    return FencePlan(fence, at_fence, to_raise)


def master_count_warning(masters: int) -> str | None:
    """Why `masters` is a poor number of masters, or None when it is fine."""
    if masters < 3:
        return (
            f"Redlock over {masters} master(s) tolerates no failed master: use 3 or more "
            "independent masters (5 tolerate 2 failures), or seawall.Lock for one server"
        )
    if masters % 2 == 0:
        return (
            f"Redlock over an even number of masters ({masters}) needs {quorum(masters)} "
            f"votes yet tolerates no more failures than {masters - 1} masters would: use "
            "an odd number of masters"
        )
    return None


def master_identity(connection_kwargs: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """Which server a client talks to, from its connection pool's kwargs (None: unknown,
    as for a Sentinel-managed pool, which learns its address later).

    Two clients with the same identity are the same master even when they select
    different databases: a lock on one server counted twice would fake a majority.
    """
    path = connection_kwargs.get("path")
    if path:
        return ("unix", str(path))
    if "host" not in connection_kwargs:
        return None
    host = str(connection_kwargs.get("host", "localhost")).strip("[]").lower()
    if host in ("localhost", "::1", "0.0.0.0", "::"):
        host = "127.0.0.1"
    return ("tcp", host, int(connection_kwargs.get("port", 6379)))
