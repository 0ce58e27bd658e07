"""Run an acquire script and WAIT for replicas on one connection (see seawall.locks._replication).

WAIT counts the replicas that have acknowledged every write made so far on the connection
that sends it. With a pool, a script sent as one command and WAIT sent as another may go
over different connections, and WAIT would then vouch for someone else's writes. Both go
in one non-transactional pipeline instead, which uses one connection: on Redis Cluster the
connection to the node owning the key (WAIT is sent to that node explicitly, as it has no
key to route by), and on a Sentinel-managed client the connection to the current master.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis.asyncio.cluster
from redis.exceptions import NoScriptError

from seawall.locks._replication import ReplicaPolicy
from seawall.shared._bounded import async_within
from seawall.shared._concurrency import async_node_of
from seawall.shared._scripts import LuaScript
from seawall.shared._validate import AsyncClient


async def run_script_replicated(
    client: AsyncClient,
    script: LuaScript,
    keys: Sequence[str],
    args: Sequence[Any],
    policy: ReplicaPolicy,
) -> tuple[Any, int]:
    """Run `script` (like `run_script`), then WAIT; returns (its reply, replicas that acked).

    WAIT runs whatever the script did: after a failed try it returns as soon as the
    replicas caught up with this connection, or after the policy's timeout when too few
    replicas are connected (a contended acquire then waits that long per try).
    """
    head: tuple[Any, ...] = ("EVALSHA", script.sha, len(keys), *keys, *args)
    results = await _send(client, head, keys[0], policy)
    if isinstance(results[0], NoScriptError):
        # The script did not run, so the WAIT answered for nothing: send both again.
        head = ("EVAL", script.source, len(keys), *keys, *args)
        results = await _send(client, head, keys[0], policy)
    for result in results:
        if isinstance(result, Exception):
            raise result
    return results[0], int(results[1])


async def _send(
    client: AsyncClient, head: tuple[Any, ...], key: str, policy: ReplicaPolicy
) -> list[Any]:
    wait = ("WAIT", policy.replicas, policy.wait_ms)
    pipe: Any = client.pipeline(transaction=False)
    pipe.execute_command(*head)
    if isinstance(client, redis.asyncio.cluster.RedisCluster):
        pipe.execute_command(*wait, target_nodes=await async_node_of(client, key))
    else:
        pipe.execute_command(*wait)
    # Bounded by the caller's deadline (seawall.shared._bounded), whatever the socket timeout.
    results: list[Any] = await async_within(lambda: pipe.execute(raise_on_error=False))
    return results
