"""Lease arithmetic: when to renew, when a lease is lost, how long a waiter may sleep. No I/O."""

from __future__ import annotations

import warnings

from seawall.shared._validate import check_seconds

# Renew at a third of the ttl: two more renewals fit before the lease lapses, so one failed
# round trip (a dropped connection, a failover) does not cost the lease.
RENEW_FRACTION = 1 / 3

# A waiter sleeps at most this long before re-checking on its own, in case a release signal
# was lost (pub/sub drops messages when its connection breaks).
MAX_WAIT_SLICE = 2.0

# Contended locks (see lock_release.lua): a waiter queued this long gets the lock
# handed to it (granted outright where its process can be seen to listen, else reserved
# for it for HANDOFF); plain wake-ups come at most once per WAKE_THROTTLE, and a woken
# waiter that lost the race looks again after that.
STARVING = 0.035
HANDOFF = 0.100
WAKE_THROTTLE = 0.010

# A release is remembered at least this long (see lock_release.lua), so that a release
# redis-py retries after a lost reply (its retries back off for seconds) still answers
# "released"; a record lives as long as the lease it ended when that is longer.
RELEASE_MEMORY = 20.0


def release_memory_ms(lease_left: float | None) -> str:
    """The release script's ARGV for how long its record must last: "" when the lease
    left (None: unknown) already outlasts RELEASE_MEMORY, else RELEASE_MEMORY in ms."""
    if lease_left is not None and lease_left >= RELEASE_MEMORY:
        return ""
    return str(ms(RELEASE_MEMORY))


# After a failed renewal, retry this often (as a fraction of the ttl) until the lease lapses.
RETRY_FRACTION = 1 / 10
MIN_RETRY = 0.01


def ms(seconds: float) -> int:
    """Seconds as whole milliseconds for Redis, at least 1."""
    return max(1, round(seconds * 1000))


def renew_at(sent_at: float, ttl: float) -> float:
    """When to renew a lease whose last renewal was sent at `sent_at`."""
    return sent_at + ttl * RENEW_FRACTION


def lease_deadline(sent_at: float, ttl: float) -> float:
    """When a lease set by a command sent at `sent_at` lapses at the latest.

    Counting from the send (not the reply) is the safe side: the server started the ttl at
    some point after `sent_at`, so the real expiry is never earlier than this.
    """
    return sent_at + ttl


def retry_at(now: float, ttl: float, deadline: float) -> float:
    """When to retry a renewal that failed at `now`; at most the lease deadline."""
    return min(now + max(ttl * RETRY_FRACTION, MIN_RETRY), deadline)


def wait_slice(holder_pttl_ms: int, remaining: float | None) -> float:
    """How long a waiter sleeps before re-checking without a release signal.

    The holder's key expires after `holder_pttl_ms` (if it dies, no release signal will come),
    so sleeping past that is never needed; -1 means the key has no expiry (set by hand).
    """
    slice_ = (
        MAX_WAIT_SLICE if holder_pttl_ms < 0 else min(holder_pttl_ms / 1000 + 0.001, MAX_WAIT_SLICE)
    )
    if remaining is not None:
        slice_ = min(slice_, remaining)
    return max(slice_, 0.0)


def extend_request(
    legacy: float | None, ttl: float | None, additional: float | None, what: str
) -> tuple[float | None, bool]:
    """What an `extend()` call asks for: (seconds, add). `add` False: set the lease to
    `seconds` (None: to the hold's own ttl); True: add `seconds` to what is left of it.

    `legacy` is the old positional form, `extend(t)`: it sets the lease to t, where
    redis-py's `extend(t)` adds t, so a call ported from redis-py would shorten the lease
    it meant to lengthen. It still sets, with a DeprecationWarning naming both keywords.
    """
    if legacy is not None:
        if ttl is not None or additional is not None:
            raise TypeError(f"extend() of {what} takes ttl= or additional=, not a positional too")
        warnings.warn(
            f"extend({legacy!r}) of {what} sets the lease to {legacy!r} s (redis-py's "
            "extend adds): write extend(ttl=...) to set it, or extend(additional=...) to "
            "add to what is left; the positional form will go",
            DeprecationWarning,
            stacklevel=3,
        )
        ttl = legacy
    if ttl is not None and additional is not None:
        raise TypeError(
            f"extend() of {what} takes ttl= (set the lease) or additional= (add to what is "
            "left of it), not both"
        )
    if additional is not None:
        return check_seconds(additional, f"additional time of {what}"), True
    if ttl is not None:
        return check_seconds(ttl, f"ttl of {what}"), False
    return None, False
