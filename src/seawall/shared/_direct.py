"""seawall's scripts (and the cache's plain reads) on a pooled connection of their client,
without redis-py's per-command hooks.

Every Lua script of seawall runs through `run_script`, and a lock cycle is two of them. On
a plain `redis.Redis` (and `redis.asyncio.Redis`) client, `execute_command` spends about
as much client CPU on its observability hooks, closures and event dispatch as on sending
the command and parsing its reply: a fifth of a lock cycle's client time, for nothing a
lock needs. `call` / `async_call` do what it does for an EVALSHA, and only that: take a
connection from the client's own pool, send (packed by hiredis where it is installed and
packs what the connection's encoder would), read the reply, with the client's own
`Retry` (a connection error disconnects and, while retries remain, tries again on the
same connection, as redis-py does), and give the connection back.

Only where that is all `execute_command` would do: a client of redis-py's own class or a
subclass that keeps its `execute_command`, not bound to a single connection, with no
response callback set for the command, no client-side caching. Anything else (Cluster,
a subclass that wraps commands, a single-connection client) goes through
`execute_command`. redis-py's own OpenTelemetry metrics do not count these commands;
seawall's metrics (seawall.metrics) count what they do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster

from seawall.errors import ClusterClientError
from seawall.shared import _fanout

_hiredis_pack: Callable[[tuple[Any, ...]], bytes] | None
try:
    from hiredis import pack_command as _hiredis_pack
except ImportError:  # hiredis is an extra (seawall[hiredis])
    _hiredis_pack = None

# Commands that may take the direct path: seawall's script runs and the cache's plain read.
_DIRECT_COMMANDS = frozenset({"EVALSHA", "EVAL", "MGET"})

# Arguments hiredis packs exactly as redis-py's encoder does (for a UTF-8 connection).
_PLAIN_ARGUMENTS = frozenset({str, int, bytes})

# Per client class: whether its execute_command is redis-py's own (looked up once).
_plain_classes: dict[type, bool] = {}


def _plain(cls: type, base: type) -> bool:
    plain = _plain_classes.get(cls)
    if plain is None:
        plain = _plain_classes[cls] = issubclass(cls, base) and all(
            getattr(cls, name, None) is getattr(base, name, None)
            for name in ("execute_command", "_execute_command")
        )
    return plain


def fits(client: Any, command: Sequence[Any]) -> bool:
    """Whether `command` may go straight to a pooled connection of sync `client`."""
    return (
        command[0] in _DIRECT_COMMANDS
        and _plain(type(client), redis.Redis)
        and client.connection is None
        and getattr(client.connection_pool, "cache", None) is None  # client-side caching
        and command[0] not in client.response_callbacks
    )


def async_fits(client: Any, command: Sequence[Any]) -> bool:
    """Whether `command` may go straight to a pooled connection of asyncio `client`."""
    return (
        command[0] in _DIRECT_COMMANDS
        and _plain(type(client), redis.asyncio.Redis)
        and client.connection is None
        and not client.single_connection_client
        and command[0] not in client.response_callbacks
    )


def call(client: Any, command: Sequence[Any]) -> Any:
    """Run `command` (which `fits` `client`) on a connection of the client's pool."""
    pool = client.connection_pool
    connection = _fanout.pooled_connection(pool)
    try:

        def send_and_read() -> Any:
            connection.send_packed_command(_packed(connection, command))
            return connection.read_response()

        def failed(error: Exception) -> None:
            connection.disconnect()

        return connection.retry.call_with_retry(send_and_read, failed)
    finally:
        _reconnect_if_asked(connection)
        pool.release(connection)


async def async_call(client: Any, command: Sequence[Any]) -> Any:
    """Run `command` (which `async_fits` `client`) on a connection of the client's pool."""
    pool = client.connection_pool
    connection = await _async_connection(pool)
    try:

        async def send_and_read() -> Any:
            await connection.send_packed_command(_packed(connection, command))
            return await connection.read_response()

        async def failed(error: Exception) -> None:
            await connection.disconnect()

        return await connection.retry.call_with_retry(send_and_read, failed)
    finally:
        await pool.release(connection)


def _packed(connection: Any, command: Sequence[Any]) -> list[bytes]:
    """`command` in the wire format: by hiredis, in C, where it packs what the connection's
    own encoder would (redis.asyncio packs in Python, about a microsecond an argument)."""
    encoder = connection.encoder
    if (
        _hiredis_pack is not None
        and encoder.encoding == "utf-8"
        and encoder.encoding_errors == "strict"
        and all(type(argument) in _PLAIN_ARGUMENTS for argument in command)
    ):
        return [_hiredis_pack(tuple(command))]
    packed: list[bytes] = connection.pack_command(*command)
    return packed


def run(client: Any, command: Sequence[Any]) -> Any:
    """`command` on the direct path where it `fits`, else through `execute_command`."""
    try:
        if fits(client, command):
            return call(client, command)
        return client.execute_command(*command)
    except REDIRECTS as exc:
        raise wrong_client(client, exc) from exc


async def async_run(client: Any, command: Sequence[Any]) -> Any:
    """`command` on the direct path where it `async_fits`, else through `execute_command`."""
    try:
        if async_fits(client, command):
            return await async_call(client, command)
        return await client.execute_command(*command)
    except REDIRECTS as exc:
        raise wrong_client(client, exc) from exc


# What a Cluster node answers a client that is not a cluster client (a cluster client
# follows MOVED and ASK itself and never sends a cross-slot command).
REDIRECTS = (redis.exceptions.AskError, redis.exceptions.ClusterCrossSlotError)


def wrong_client(client: Any, error: Exception) -> Exception:
    """The error to raise for `error`, a redirection a Cluster node answered `client`:
    one that names the fix when `client` is a plain client, else `error` itself."""
    if isinstance(client, (redis.cluster.RedisCluster, redis.asyncio.cluster.RedisCluster)):
        return error
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", {})
    where = f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}"
    asyncio = isinstance(client, redis.asyncio.Redis)
    wanted = "redis.asyncio.cluster.RedisCluster" if asyncio else "redis.cluster.RedisCluster"
    answer = {"MovedError": "MOVED ", "AskError": "ASK "}.get(type(error).__name__, "")
    answer += str(error).split("\n")[0]
    return ClusterClientError(
        f"the {type(client).__module__}.{type(client).__qualname__} client of {where} talks to "
        f"a Redis Cluster node, which answered {answer!r}: a plain "
        f"client cannot follow the cluster's slots; pass a {wanted} instead "
        f"({wanted.rpartition('.')[2]}.from_url('redis://{where}') finds every node)"
    )


async def _async_connection(pool: Any) -> Any:
    try:
        return await pool.get_connection()
    except TypeError:  # redis-py before 5.3 wants a command name
        return await pool.get_connection("EVALSHA")


def _reconnect_if_asked(connection: Any) -> None:
    # redis-py 6.3+ marks a connection whose server announced maintenance; its command
    # path reconnects it after the command, and so does this one.
    should = getattr(connection, "should_reconnect", None)
    if should is not None and should():
        connection.disconnect()
