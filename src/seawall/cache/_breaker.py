"""A circuit breaker for calls to Redis and a token bucket for calls to the loader. No I/O.

The cache asks `breaker.allow()` before each Redis call and reports `success()` or
`failure()` after it. While the breaker is open it does not wait on Redis at all: it serves
its local copy (stale within a bound) and calls the loader only when `limiter.try_acquire()`
says so, so a dead Redis costs neither timeouts per request nor a flood on the database.

Both are thread-safe (the sync cache is shared by threads) and take an injectable clock.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Literal

State = Literal["closed", "open", "half-open"]

CLOSED: State = "closed"
OPEN: State = "open"
HALF_OPEN: State = "half-open"

# How many state changes `CircuitBreaker.transitions` keeps.
TRANSITIONS_KEPT = 1000

log = logging.getLogger("seawall")


def _positive(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{what} must be a number, got {type(value).__qualname__}: {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{what} must be a finite number > 0, got {value!r}")
    return float(value)


def _count(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, got {type(value).__qualname__}: {value!r}")
    if value < 1:
        raise ValueError(f"{what} must be >= 1, got {value!r}")
    return value


class CircuitBreaker:
    """closed -> (failures) -> open -> (open_for passed) -> half-open -> closed or open.

    - closed: every call is allowed; `failure_threshold` failures in a row open it, and so
      does one call that timed out (`failure(timed_out=True)`): with `call_timeout` as the
      bound of each call, a frozen or unreachable Redis opens it within that time, and a
      Redis that refuses connections within `failure_threshold` fast failures.
    - open: no call is allowed for `open_for` seconds.
    - half-open: one probe call is allowed; its `success()` closes the breaker, its
      `failure()` opens it again. A probe that never reports back (its caller died or
      forgot) is replaced by another after `call_timeout`.

    An outage is logged twice at WARNING, whatever the breaker does meanwhile: when it
    opens from closed, and when it closes again (its probes failing in between, reopening
    it every `open_for`, are DEBUG). `name` says whose breaker it is in those lines; a
    Cache given an unnamed breaker names it after itself.
    """

    def __init__(
        self,
        failure_threshold: int = 3,
        open_for: float = 1.0,
        *,
        call_timeout: float = 0.25,
        clock: Callable[[], float] = time.monotonic,
        name: str | None = None,
    ) -> None:
        self.name = name
        self.failure_threshold = _count(failure_threshold, "failure_threshold")
        self.open_for = _positive(open_for, "open_for")
        self.call_timeout = _positive(call_timeout, "call_timeout")
        self._clock = clock
        self._mutex = threading.Lock()
        self._state: State = CLOSED
        self._failures = 0  # in a row, while closed
        self._opened_at = 0.0
        self._probe_since: float | None = None  # when the half-open probe was let through
        self.times_opened = 0
        self.rejected = 0  # calls not allowed while open
        # (clock time, new state) of the latest changes, oldest first: to see when it
        # opened and closed (monitoring, tests), without a callback under the mutex.
        self.transitions: deque[tuple[float, State]] = deque(maxlen=TRANSITIONS_KEPT)
        self._outage_since: float | None = None  # when it opened from closed
        self._rejected_at_open = 0

    def __repr__(self) -> str:
        return f"<CircuitBreaker {self.state} failures={self._failures}>"

    @property
    def state(self) -> State:
        with self._mutex:
            self._advance(self._clock())
            return self._state

    def _advance(self, now: float) -> None:
        if self._state == OPEN and now - self._opened_at >= self.open_for:
            self._change(HALF_OPEN, now)
            self._probe_since = None

    def _change(self, state: State, now: float) -> None:
        if state != self._state:
            self._state = state
            self.transitions.append((now, state))
            self._report(state, now)

    def _report(self, state: State, now: float) -> None:
        """One WARNING when an outage starts, one when it ends; the flapping between is
        DEBUG (a handler must not block: this runs under the breaker's mutex)."""
        who = f"circuit breaker {self.name}" if self.name else "circuit breaker"
        if state == OPEN and self._outage_since is None:
            self._outage_since = now
            self._rejected_at_open = self.rejected
            log.warning(
                "%s opened after %d failed call(s) to Redis (or one that took over %s s): "
                "Redis is not called for %s s, then probed once",
                who,
                self._failures,
                self.call_timeout,
                self.open_for,
            )
        elif state == CLOSED and self._outage_since is not None:
            log.warning(
                "%s closed: Redis answered a probe; it was open %.2f s and turned away %d call(s)",
                who,
                now - self._outage_since,
                self.rejected - self._rejected_at_open,
            )
            self._outage_since = None
        else:
            log.debug("%s is %s", who, state)

    def allow(self) -> bool:
        """Whether to call Redis now. Each True must be followed by success() or failure()."""
        with self._mutex:
            now = self._clock()
            self._advance(now)
            if self._state == CLOSED:
                return True
            if self._state == HALF_OPEN and (
                self._probe_since is None or now - self._probe_since >= self.call_timeout
            ):
                self._probe_since = now
                return True
            self.rejected += 1
            return False

    def success(self) -> None:
        """The call answered (a reply, even an error reply, means Redis is alive)."""
        with self._mutex:
            now = self._clock()
            self._advance(now)
            if self._state == OPEN:
                # A call allowed before the breaker opened, answered just before the fault
                # (its report raced another thread's failure): it says nothing about now.
                return
            self._change(CLOSED, now)
            self._failures = 0
            self._probe_since = None

    def failure(self, *, timed_out: bool = False) -> None:
        """The call failed to reach Redis, or (timed_out) gave up waiting on it."""
        with self._mutex:
            now = self._clock()
            self._advance(now)
            if self._state == OPEN:
                return  # a call allowed before the breaker opened; it changes nothing
            self._failures += 1
            if self._state == HALF_OPEN or timed_out or self._failures >= self.failure_threshold:
                self._change(OPEN, now)
                self._opened_at = now
                self._failures = 0
                self._probe_since = None
                self.times_opened += 1


class RateLimiter:
    """A token bucket: on average `rate_per_s` acquisitions a second, at most `burst` at once.

    The bucket starts full. `try_acquire` never waits: the cache skips the loader (serving
    stale, or failing for that key) when it says False.
    """

    def __init__(
        self,
        rate_per_s: float,
        burst: int = 1,
        *,
        clock: Callable[[], float] = time.monotonic,
        name: str | None = None,
    ) -> None:
        self.name = name
        self.rate_per_s = _positive(rate_per_s, "rate_per_s")
        self.burst = _count(burst, "burst")
        self._clock = clock
        self._mutex = threading.Lock()
        self._tokens = float(self.burst)
        self._updated = clock()
        self.denied = 0

    def __repr__(self) -> str:
        return f"<RateLimiter {self.rate_per_s}/s burst={self.burst}>"

    def _refill(self, now: float) -> None:
        # A clock that steps back (an injected one) must not drain the bucket.
        elapsed = max(0.0, now - self._updated)
        self._tokens = min(float(self.burst), self._tokens + elapsed * self.rate_per_s)
        self._updated = now

    def try_acquire(self, tokens: int = 1) -> bool:
        """Take `tokens` if the bucket holds them; never waits."""
        if tokens > self.burst:
            raise ValueError(
                f"cannot take {tokens} tokens at once from a bucket of burst {self.burst}"
            )
        with self._mutex:
            self._refill(self._clock())
            if self._tokens >= tokens:
                self._tokens -= tokens
                return True
            self.denied += 1
            return False

    def retry_after(self) -> float:
        """Seconds until one token is available (0.0 if one is now)."""
        with self._mutex:
            self._refill(self._clock())
            return max(0.0, (1.0 - self._tokens) / self.rate_per_s)
