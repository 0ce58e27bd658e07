"""The invalidation broadcast's channels and message format. No I/O.

Channels: "seawall:inval:<namespace>", one per cache namespace, for the changes of keys;
"seawall:cleared:<namespace>" for Cache.clear(), which moves the namespace's generation
on. A listener subscribes to the pattern "seawall:cleared:*", and to "seawall:inval:*"
only while it has L1s to keep (a process whose caches all run with the L1 off then hears
of clears only, not of every write), so a process needs one connection whatever it caches.

Message body (UTF-8): "<sender>:<op>:<key>"
- sender: the 32 lowercase hex digits of the publishing invalidator's id, so a process can
  tell (and skip) its own messages;
- op: "d" drop `key` from every local copy of the namespace, "c" drop everything in the
  namespace;
- key: for "d", the cache key, as the cache's L1 stores it; it may contain ":". For "c",
  empty on "seawall:inval:" (warm(): the L1s only), and on "seawall:cleared:" the
  namespace's new generation in decimal (entries are then named with it: see
  cache_generation.lua); a listener drops its L1 copies of the namespace on either.

A Lua script publishes the same message as
    redis.call('publish', 'seawall:inval:' .. namespace, sender .. ':d:' .. key)
"""

from __future__ import annotations

from typing import Literal, NamedTuple

CHANNEL_PREFIX = "seawall:inval:"
PATTERN = CHANNEL_PREFIX + "*"
CLEARED_PREFIX = "seawall:cleared:"
CLEARED_PATTERN = CLEARED_PREFIX + "*"

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


def cleared_channel(namespace: str) -> str:
    return CLEARED_PREFIX + namespace


def encode(sender: str, op: Literal["d", "c"], key: str = "") -> str:
    return f"{sender}:{op}:{key}"


def generation(message: Message) -> int | None:
    """The generation a clear message announces (None: it only empties the L1s)."""
    if message.op != CLEAR or not message.key:
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
    sender, sep1, rest = text.partition(":")
    op, sep2, key = rest.partition(":")
    if not (sep1 and sep2) or len(sender) != SENDER_LENGTH or op not in (DISCARD, CLEAR):
        return None
    if name.startswith(CLEARED_PREFIX):
        if op != CLEAR or not (key.isascii() and key.isdigit()):
            return None  # a clear that names no generation: the caller clears everything
        return Message(name[len(CLEARED_PREFIX) :], sender, CLEAR, key)
    if not name.startswith(CHANNEL_PREFIX):
        return None
    if op == CLEAR:
        return Message(name[len(CHANNEL_PREFIX) :], sender, CLEAR, "")  # the L1s only
    return Message(name[len(CHANNEL_PREFIX) :], sender, DISCARD, key)
