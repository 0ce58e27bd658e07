"""`--max-ops N`: a token bucket, so a long scan never takes more than N ops/s of a server.

An op is one key-level action on the server: one SCAN, one MEMORY USAGE, one key given to
UNLINK. The bucket holds at most a tenth of a second of ops, so a pause is never followed
by a burst, and a batch bigger than the bucket waits for its whole cost (it is sent at the
rate, just in one piece). Pure: the clock is injected and `delay` only says how long to
wait; `Limiter.take` is the thin part that sleeps.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["Limiter", "TokenBucket"]


class TokenBucket:
    def __init__(self, rate: float, *, now: float, burst_seconds: float = 0.1) -> None:
        if not rate > 0:
            raise ValueError(f"--max-ops must be > 0 ops per second, got {rate!r}")
        self.rate = rate
        self.capacity = max(1.0, rate * burst_seconds)
        self.tokens = self.capacity
        self.stamp = now

    def delay(self, cost: float, now: float) -> float:
        """Spend `cost` ops; the seconds to wait before sending them (0: go now)."""
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        self.tokens -= cost
        return 0.0 if self.tokens >= 0 else -self.tokens / self.rate


class Limiter:
    """`take(cost)` sleeps as long as the bucket says; with no rate it never sleeps."""

    def __init__(
        self,
        max_ops: float | None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._clock = clock
        self._sleep = sleep
        self.bucket = None if not max_ops else TokenBucket(max_ops, now=clock())
        self.ops = 0

    def take(self, cost: int) -> None:
        self.ops += cost
        if self.bucket is None:
            return
        wait = self.bucket.delay(cost, self._clock())
        if wait > 0:
            self._sleep(wait)
