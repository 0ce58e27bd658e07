"""The one EVALSHA helper: every Lua script of seawall runs through `run_script`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.exceptions import NoScriptError

from seawall.shared import _eviction
from seawall.shared._async.eviction import check_eviction_policy
from seawall.shared._bounded import async_execute
from seawall.shared._scripts import LuaScript
from seawall.shared._validate import AsyncClient


async def run_script(
    client: AsyncClient, script: LuaScript, keys: Sequence[str], args: Sequence[Any]
) -> Any:
    """Run `script` by its SHA; on NOSCRIPT send the source once with EVAL.

    EVAL both runs the script and caches it on the node that ran it (after a restart, a
    failover or SCRIPT FLUSH), so nothing about "loaded" state is remembered client-side;
    on Cluster each node fills its own cache the same way.

    Inside `async_until(deadline)` (seawall.shared._bounded) the call ends by the deadline,
    whatever the client's socket timeout.
    """
    key = keys[0]
    try:
        reply = await async_execute(client, ("EVALSHA", script.sha, len(keys), *keys, *args), key)
    except NoScriptError:
        reply = await async_execute(client, ("EVAL", script.source, len(keys), *keys, *args), key)
    # After the script, from a server that has just answered: checked before it, a server
    # frozen from the start would make the caller wait twice, once outside its timeout.
    if _eviction.claim(client, script.name):
        await check_eviction_policy(client)
    return reply
