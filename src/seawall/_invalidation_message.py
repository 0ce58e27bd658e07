"""The invalidation broadcast's channels and message format. No I/O.

Channel: "seawall:inval:<namespace>", one per cache namespace; listeners subscribe to the
pattern "seawall:inval:*", so a process needs one subscription whatever it caches.

Message body (UTF-8): "<sender>:<op>:<key>"
- sender: the 32 lowercase hex digits of the publishing invalidator's id, so a process can
  tell (and skip) its own messages;
- op: "d" drop `key` from every local copy of the namespace, "c" drop everything in the
  namespace;
- key: for "d", the cache key, as the cache's L1 stores it; it may contain ":". For "c",
  the namespace's new generation in decimal when Cache.clear() moved it on (entries are
  then named with it: see cache_generation.lua), else empty.

A Lua script publishes the same message as
    redis.call('publish', 'seawall:inval:' .. namespace, sender .. ':d:' .. key)
"""

from __future__ import annotations

from typing import Literal, NamedTuple

CHANNEL_PREFIX = "seawall:inval:"
PATTERN = CHANNEL_PREFIX + "*"

DISCARD: Literal["d"] = "d"
CLEAR: Literal["c"] = "c"
SENDER_LENGTH = 32


class Message(NamedTuple):
    namespace: str
    sender: str
    op: Literal["d", "c"]
    key: str


def channel(namespace: str) -> str:
    return CHANNEL_PREFIX + namespace


def encode(sender: str, op: Literal["d", "c"], key: str = "") -> str:
    return f"{sender}:{op}:{key}"


def generation(message: Message) -> int | None:
    """The generation a clear message announces (None: it only empties the L1s)."""
    if message.op != CLEAR or not (message.key.isascii() and message.key.isdigit()):
        return None
    return int(message.key)


def _text(value: bytes | str) -> str:
    # strict: a key that does not decode cannot be matched, and the caller clears instead.
    return value.decode("utf-8") if isinstance(value, bytes) else value


def decode(channel_name: bytes | str, body: bytes | str) -> Message | None:
    """The message, or None when it is not one of ours or malformed (then clear: a
    discard that cannot be read must not leave a stale copy behind)."""
    try:
        name = _text(channel_name)
        text = _text(body)
    except UnicodeDecodeError:
        return None
    if not name.startswith(CHANNEL_PREFIX):
        return None
    sender, sep1, rest = text.partition(":")
    op, sep2, key = rest.partition(":")
    if not (sep1 and sep2) or len(sender) != SENDER_LENGTH or op not in (DISCARD, CLEAR):
        return None
    return Message(name[len(CHANNEL_PREFIX) :], sender, DISCARD if op == DISCARD else CLEAR, key)
