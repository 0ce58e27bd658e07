"""Freshness arithmetic of seawall.Cache: ttl jitter and XFetch early refresh. No I/O."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

# Spread of ttls around the requested one, so keys written together do not expire together.
DEFAULT_JITTER = 0.1


def jittered(ttl: float, jitter: float, rand: Callable[[], float] = random.random) -> float:
    """`ttl` moved uniformly within +-`jitter` (a fraction of it); never below 1 ms."""
    if jitter <= 0:
        return ttl
    return max(0.001, ttl * (1.0 + jitter * (2.0 * rand() - 1.0)))


def xfetch_due(
    remaining: float,
    delta: float,
    beta: float = 1.0,
    rand: Callable[[], float] = random.random,
) -> bool:
    """Whether to refresh a value early (XFetch, Vattani et al., VLDB 2015).

    Refresh when now - delta * beta * ln(u) >= expiry, with u uniform in (0, 1]: that is
    -delta * beta * ln(u) >= `remaining` (seconds left before the logical expiry). `delta`
    is how long the last load took, so slow loads start earlier; a larger `beta` refreshes
    earlier. At remaining == delta and beta 1 the chance is 1/e, about 36.8%.
    """
    if remaining <= 0:
        return True
    if delta <= 0 or beta <= 0:
        return False
    u = 1.0 - rand()  # (0, 1]: random() may return 0, whose log is undefined
    return -delta * beta * math.log(u) >= remaining


# XFetch's chance to refresh earlier than XFETCH_SPAN * delta * beta before the expiry is
# e**-XFETCH_SPAN (about 1 in 3000): a fresh hit that early skips the draw.
XFETCH_SPAN = 8.0


def hit_lead(l1_ttl: float, beta: float | None, delta: float) -> float:
    """Seconds before the logical expiry at which a fresh hit stops being a plain read.

    Until then a reader knows, without any clock, that the value stays fresh at least
    this long: it may keep it in its L1 (`l1_ttl`, 0 when off) and XFetch would not yet
    refresh it (`beta`, None when off; `delta`: how long the load took). In the last
    `lead` seconds, reads go through the fetch script, which knows the exact time left.
    """
    lead = max(l1_ttl, 0.0)
    if beta is not None and beta > 0 and delta > 0:
        lead = max(lead, XFETCH_SPAN * beta * delta)
    return lead
