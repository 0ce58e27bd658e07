"""The eviction-policy check: one CONFIG GET per client (per primary on Cluster), made by
the first script of a primitive whose keys must not be evicted. See seawall/shared/_eviction.py."""

from __future__ import annotations

from typing import Any

import redis.asyncio.cluster

from seawall.shared import _eviction
from seawall.shared._concurrency import log
from seawall.shared._validate import AsyncClient


async def check_eviction_policy(client: AsyncClient) -> None:
    """Warn when the server may evict seawall's keys; called once per client, by the
    caller that won `_eviction.claim` (run_script asks it before calling, so the common
    path pays no call).

    Never raises: the check is advice, run after a script that succeeded, whose reply
    must reach the caller. A server that refuses CONFIG (a managed service, an ACL user
    without it) is noted once at debug level.
    """
    try:
        replies = await _policy_replies(client)
    except Exception as exc:  # advice only: see the docstring
        log.debug("%s", _eviction.unchecked_note(_eviction.describe(client), exc))
        return
    policies = _eviction.by_policy(replies)
    safe = {}
    for policy, servers in policies.items():
        if _eviction.evicts(policy):
            log.warning("%s", _eviction.warning(policy, servers))
        else:
            safe[policy] = servers
    if safe:
        log.debug("%s", _eviction.safe_note(safe))


async def _policy_replies(client: AsyncClient) -> list[tuple[str, Any]]:
    if isinstance(client, redis.asyncio.cluster.RedisCluster):
        # Each primary has its own configuration: check them all.
        return [
            (node.name, await client.config_get("maxmemory-policy", target_nodes=node))
            for node in client.get_primaries()  # type: ignore[no-untyped-call,unused-ignore]
        ]
    return [(_eviction.describe(client), await client.config_get("maxmemory-policy"))]
