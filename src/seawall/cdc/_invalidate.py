"""The follower's Redis side: invalidate many cache entries in one round trip, and move
the checkpoint only with the election's fence.

Each invalidation is exactly what `seawall.Cache(r, namespace).delete(key)` sends: the
cache_void script with the cache's own keys (under the namespace's generation as Redis
holds it, read in the same round trip: see seawall.cache._async.generation) and
invalidation message, so L2 drops the value (a cached "absent" too), loads in flight are
voided, waiters are woken, and every process's L1 drops its copy. Only the round trips
differ: one pipeline per batch.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from seawall.cache import _invalidation_message as message_format
from seawall.cache._sync.generation import void_entries
from seawall.shared import _scripts
from seawall.shared._keys import tagged
from seawall.shared._sync.scripts import run_script

__all__ = [
    "checkpoint_key",
    "invalidate",
    "new_sender",
    "read_checkpoint",
    "read_checkpoint_server",
    "write_checkpoint",
]

_CHECKPOINT = _scripts.load("seawall.cdc", "cdc_checkpoint")


def new_sender() -> str:
    """An invalidation sender id: no process's L1 listener skips a message from it."""
    return uuid.uuid4().hex


def invalidate(
    client: Any,
    entries: Iterable[tuple[str, str]],
    sender: str,
    generations: dict[str, int] | None = None,
) -> int:
    """Void every (namespace, key) in one pipelined round trip (one per node on Cluster,
    after one read of the generations), exactly as Cache.delete_many does; returns how
    many. `generations`: the
    namespaces' generations seen by the last call (updated here), so the round trip
    names the right keys at once.

    Raises the first Redis error: the caller retries the whole batch (a delete twice is
    harmless) and must not checkpoint past it.
    """
    unique = list(dict.fromkeys(entries))
    calls = [
        (
            namespace,
            key,
            message_format.channel(namespace),
            message_format.encode(sender, message_format.DISCARD, key),
        )
        for namespace, key in unique
    ]
    void_entries(client, calls, {} if generations is None else generations)
    return len(unique)


def checkpoint_key(source_name: str) -> str:
    return f"{tagged('cdc', source_name)}:checkpoint"


def read_checkpoint(client: Any, source_name: str) -> tuple[str | None, int]:
    """(position, fence of the follower that wrote it); (None, 0) before the first."""
    position, fence = client.hmget(checkpoint_key(source_name), ["position", "fence"])
    if isinstance(position, bytes):
        position = position.decode()
    return position, int(fence) if fence is not None else 0


def read_checkpoint_server(client: Any, source_name: str) -> str | None:
    """The server a checkpoint's position was read from, if its writer named one."""
    server = client.hget(checkpoint_key(source_name), "server")
    return server.decode() if isinstance(server, bytes) else server


def write_checkpoint(
    client: Any, source_name: str, position: str, fence: int, server: str | None = None
) -> bool:
    """Store `position` (and the `server` it was read from, if given) unless a follower
    with a newer fence wrote; False: deposed."""
    key = checkpoint_key(source_name)
    args = (fence, position) if server is None else (fence, position, server)
    return bool(run_script(client, _CHECKPOINT, (key,), args))
