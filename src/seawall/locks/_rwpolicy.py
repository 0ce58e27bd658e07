"""Reader-writer lock timing: intents, admission, how long a waiter may sleep. No I/O."""

from __future__ import annotations

from seawall.locks import _lease

# A waiting writer's intent (which holds new readers back) lasts this long unless the
# writer refreshes it by trying again: a writer that died while waiting stops blocking
# readers after at most MAX_INTENT seconds, or its lock's ttl if shorter (never below
# MIN_INTENT, so tiny ttls do not turn waiting into polling).
MIN_INTENT = 0.5
MAX_INTENT = 5.0

# A waiting writer retries at least this many times per intent period, so one slow try on
# a loaded machine does not let its intent lapse.
INTENT_REFRESHES = 3

# A waiting reader's queue entry lasts this long unless refreshed; a reader sleeps at most
# _lease.MAX_WAIT_SLICE between tries, well inside it.
READER_QUEUE_TTL = 5.0

# After a write release, readers that were waiting go ahead of waiting writers; writers
# wait for them at most this long (it matters only if an admitted reader died on its way).
ADMIT_WINDOW = 0.5


# Seconds as whole milliseconds for Redis, at least 1 (as for every lease).
ms = _lease.ms


def intent_ttl(ttl: float) -> float:
    """How long a waiting writer's intent lasts, for a write lock with lease `ttl`."""
    return min(max(ttl, MIN_INTENT), MAX_INTENT)


def reader_pause(blocker_pttl_ms: int, remaining: float | None) -> float:
    """How long a refused reader sleeps before trying again without a wake-up."""
    return _lease.wait_slice(blocker_pttl_ms, remaining)


def writer_pause(blocker_pttl_ms: int, remaining: float | None, ttl: float) -> float:
    """How long a refused writer sleeps: also short enough to keep its intent alive."""
    return min(_lease.wait_slice(blocker_pttl_ms, remaining), intent_ttl(ttl) / INTENT_REFRESHES)
