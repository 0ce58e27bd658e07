"""Whether a server may evict seawall's coordination keys, and the warning that says so. No I/O.

A lock, a fence counter, a stock's counters or its order record, an Idempotent record or
a Bloom filter that Redis evicts to free memory breaks the guarantee it carries (two
holders of one lock, an order taken twice, an oversold stock, a handler run twice, rows
reported absent). Redis evicts only when `maxmemory` is reached, and then only what
`maxmemory-policy` allows: nothing under `noeviction`, any key under `allkeys-*`, keys with
a TTL under `volatile-*`. The first script of such a primitive on a client reads the policy
(`_async/eviction.py`); what to say about it is decided here.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable
from typing import Any

# Scripts of the primitives whose keys must never be evicted; a cache's keys may be (an
# evicted entry is a miss), so the cache scripts do not start a check.
GUARDED_SCRIPTS = (
    "lock_",
    "rlock_",
    "semaphore_",
    "rwlock_",
    "redlock_",
    "stock_",
    "sink_",
    "idempotent_",
    "bloom_",
    "fenced_write",
)

# The keys volatile-* policies may evict: seawall's keys that carry a TTL.
KEYS_WITH_A_TTL = (
    "lock, RLock and Redlock keys, semaphore and RWLock holds and their wait queues, "
    "Idempotent records, fence counters (a lost one restarts from the server clock) "
    "(and cache entries, whose eviction is only a miss)"
)
KEYS_WITHOUT_A_TTL = "stock counters, order records and logs, Bloom filters"

FIX = (
    "set `maxmemory-policy noeviction` on this server (CONFIG SET maxmemory-policy "
    "noeviction, and in its config file), or keep seawall's coordination keys on a "
    "separate Redis with noeviction; see docs/eviction.md"
)

# ids of the clients checked, each dropped when its client is collected (so a later
# object at the same address is not taken for it): `id(c) in set` is a third of the
# cost of a WeakSet lookup, which makes a weak reference on every script call.
_checked: set[int] = set()
_checked_mutex = threading.Lock()


def claim(client: Any, script_name: str) -> bool:
    """True for the one caller that is to check `client` (its first guarded script)."""
    if id(client) in _checked or not script_name.startswith(GUARDED_SCRIPTS):
        return False
    with _checked_mutex:  # threads sharing a client: one of them checks
        if id(client) in _checked:
            return False
        _checked.add(id(client))
    weakref.finalize(client, _checked.discard, id(client))
    return True


def describe(client: Any) -> str:
    """The server a (non-cluster) client talks to, for messages: host:port, a socket
    path, or the Sentinel service name."""
    pool = getattr(client, "connection_pool", None)
    service = getattr(pool, "service_name", None)
    if service:
        return f"Sentinel service {service!r}"
    kwargs = getattr(pool, "connection_kwargs", None) or {}
    if kwargs.get("path"):
        return str(kwargs["path"])
    return f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}"


def policy_of(reply: Any) -> str | None:
    """The policy in a CONFIG GET maxmemory-policy reply (a dict; bytes or str)."""
    if not isinstance(reply, dict):
        return None
    for key, value in reply.items():
        name = key.decode() if isinstance(key, bytes) else str(key)
        if name == "maxmemory-policy":
            return value.decode() if isinstance(value, bytes) else str(value)
    return None


def evicts(policy: str) -> bool:
    return policy.startswith(("allkeys-", "volatile-"))


def warning(policy: str, servers: Iterable[str]) -> str:
    """The warning for servers running `policy`, which evicts (see `evicts`)."""
    where = ", ".join(servers)
    if policy.startswith("allkeys-"):
        at_risk = (
            "it may evict any key, including seawall's locks, fence counters, stock "
            "counters and order records, Idempotent records and Bloom filters: two "
            "holders of one lock, an order taken twice, oversold stock"
        )
    else:
        at_risk = (
            f"it may evict keys that have a TTL before they expire: seawall's "
            f"{KEYS_WITH_A_TTL}; a lost hold lets a second holder in, a lost Idempotent "
            f"record runs a handler twice ({KEYS_WITHOUT_A_TTL} have no TTL and are not "
            "evicted under volatile-*)"
        )
    return (
        f"Redis at {where} has maxmemory-policy {policy}: when it reaches "
        f"maxmemory {at_risk}. Fix: {FIX}"
    )


def safe_note(policies: dict[str, list[str]]) -> str:
    """The debug line for servers that do not evict seawall's keys."""
    parts = "; ".join(f"{policy} at {', '.join(where)}" for policy, where in policies.items())
    return f"maxmemory-policy checked: {parts}"


def unchecked_note(servers: str, error: BaseException) -> str:
    return (
        f"the maxmemory-policy of Redis at {servers} could not be checked "
        f"(CONFIG GET failed: {error!r}); make sure it is noeviction, or that seawall's "
        "keys live on a server where it is (see docs/eviction.md)"
    )


def by_policy(replies: Iterable[tuple[str, Any]]) -> dict[str, list[str]]:
    """{policy: [server, ...]} from (server, CONFIG GET reply) pairs."""
    grouped: dict[str, list[str]] = {}
    for server, reply in replies:
        grouped.setdefault(policy_of(reply) or "unknown", []).append(server)
    return grouped
