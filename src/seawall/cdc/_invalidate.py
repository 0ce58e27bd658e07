"""The follower's Redis side: invalidate many cache entries in one round trip, and move
the checkpoint only with the election's fence.

Each invalidation is exactly what `seawall.Cache(r, namespace).delete(key)` sends: the
cache_void script with the cache's own keys and invalidation message, so L2 drops the
value (a cached "absent" too), loads in flight are voided, waiters are woken, and every
process's L1 drops its copy. Only the round trips differ: one pipeline per batch.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from redis.exceptions import NoScriptError

from seawall import _invalidation_message as message_format
from seawall import _scripts
from seawall._cache_codec import CACHE_WAKE_PREFIX, cache_keys
from seawall._keys import tagged
from seawall._sync.scripts import run_script

__all__ = ["checkpoint_key", "invalidate", "new_sender", "read_checkpoint", "write_checkpoint"]

_VOID = _scripts.load("cache_void")
_CHECKPOINT = _scripts.load("cdc_checkpoint")


def new_sender() -> str:
    """An invalidation sender id: no process's L1 listener skips a message from it."""
    return uuid.uuid4().hex


def invalidate(client: Any, entries: Iterable[tuple[str, str]], sender: str) -> int:
    """Void every (namespace, key) in one pipelined round trip; returns how many.

    Raises the first Redis error: the caller retries the whole batch (a delete twice is
    harmless) and must not checkpoint past it.
    """
    unique = list(dict.fromkeys(entries))
    if not unique:
        return 0
    commands: list[tuple[str, ...]] = []
    for namespace, key in unique:
        keys = cache_keys(namespace, key).all
        body = message_format.encode(sender, message_format.DISCARD, key)
        commands.append((*keys, "", CACHE_WAKE_PREFIX, message_format.channel(namespace), body))
    try:
        _send(client, commands, _VOID.sha, evalsha=True)
    except NoScriptError:
        # A restarted or flushed server: EVAL caches the script again on its node.
        _send(client, commands, _VOID.source, evalsha=False)
    return len(unique)


def _send(client: Any, commands: list[tuple[str, ...]], script: str, *, evalsha: bool) -> None:
    pipe = client.pipeline(transaction=False)
    for args in commands:
        if evalsha:
            pipe.evalsha(script, 4, *args)
        else:
            pipe.eval(script, 4, *args)
    for reply in pipe.execute(raise_on_error=False):
        if isinstance(reply, Exception):
            raise reply


def checkpoint_key(source_name: str) -> str:
    return f"{tagged('cdc', source_name)}:checkpoint"


def read_checkpoint(client: Any, source_name: str) -> tuple[str | None, int]:
    """(position, fence of the follower that wrote it); (None, 0) before the first."""
    position, fence = client.hmget(checkpoint_key(source_name), ["position", "fence"])
    if isinstance(position, bytes):
        position = position.decode()
    return position, int(fence) if fence is not None else 0


def write_checkpoint(client: Any, source_name: str, position: str, fence: int) -> bool:
    """Store `position` unless a follower with a newer fence wrote; False: deposed."""
    key = checkpoint_key(source_name)
    return bool(run_script(client, _CHECKPOINT, (key,), (fence, position)))
