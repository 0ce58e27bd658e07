"""A raw pipeline for scans that send thousands of small commands per batch.

redis-py's Pipeline spends most of a big batch's time building Python objects per command
(arguments packed one by one, a callback per reply). A scan knows its commands' shape, so
it encodes RESP itself (`encode`) and reads the replies straight from the connection:
about three times faster, which is what lets `seawall bigkeys` keep up with redis-cli.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from seawall.ops._connect import Node, guard

__all__ = ["encode", "run_raw"]


def encode(*args: bytes) -> bytes:
    """One command in RESP: *N, then $len and the bytes of each argument."""
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        parts.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(parts)


def run_raw(node: Node, commands: Sequence[bytes]) -> list[Any]:
    """Send pre-encoded commands in one write; their replies, errors as exception objects."""
    pool = node.client.connection_pool

    def call() -> list[Any]:
        conn = pool.get_connection()
        try:
            conn.send_packed_command(  # type: ignore[no-untyped-call]
                [b"".join(commands)], check_health=False
            )
            replies = []
            for _ in range(len(commands)):
                try:
                    replies.append(conn.read_response())
                except Exception as exc:  # an error reply: keep reading the others
                    if not _is_reply_error(exc):
                        raise
                    replies.append(exc)
            return replies
        except BaseException:
            # Replies may be left unread on the socket: never hand this connection back.
            conn.disconnect()  # type: ignore[no-untyped-call]
            raise
        finally:
            pool.release(conn)

    return guard(call, node.address)


def _is_reply_error(exc: Exception) -> bool:
    import redis

    return isinstance(exc, redis.ResponseError)


def present_commands(node: Node, names: Sequence[str]) -> dict[str, bool]:
    """Which of `names` the server knows (a command renamed away is unknown). Read raw:
    redis-py's COMMAND INFO parser fails on the nil entry of an unknown command."""
    reply = run_raw(node, [encode(b"COMMAND", b"INFO", *(n.encode() for n in names))])[0]
    entries = reply if isinstance(reply, list) else []
    return {
        name: bool(entry) for name, entry in zip(names, entries + [None] * len(names), strict=False)
    }
