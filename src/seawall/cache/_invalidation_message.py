"""The invalidation broadcast's channels and message format. No I/O.

Channels: "seawall:inval:<namespace>", one per cache namespace, for the changes of keys;
"seawall:cleared:<namespace>" for Cache.clear(), which moves the namespace's generation
on; "seawall:again:<namespace>" for second deletes just scheduled (see again.py). A
listener subscribes to the patterns "seawall:cleared:*" and "seawall:again:*", and to
"seawall:inval:*" only while it has L1s to keep (a process whose caches all run with the
L1 off then hears of clears only, not of every write), so a process needs one connection
whatever it caches.

Message body (UTF-8): "<sender>:<op>:<key>"
- sender: the 32 lowercase hex digits of the publishing invalidator's id, so a process can
  tell (and skip) its own messages;
- op: "d" drop `key` from every local copy of the namespace, "m" drop several keys, "c"
  drop everything in the namespace, "a" (on "seawall:again:" only) second deletes are due
  in `key` milliseconds (decimal): a sweeper of the namespace looks then;
- key: for "d", the cache key, as the cache's L1 stores it; it may contain ":". For "m",
  the keys one after the other, each as "<its length in characters>:<key>" (set_many
  publishes one message per script call, not one per key). For "c", empty on
  "seawall:inval:" (warm(): the L1s only), and on "seawall:cleared:" the namespace's new
  generation in decimal (entries are then named with it: see cache_generation.lua); a
  listener drops its L1 copies of the namespace on either.

A listener of an older seawall, which knows no "m", takes it for an unreadable message and
empties all its L1s: safe, if costly, while versions are mixed in a rolling upgrade.

A Lua script publishes the same message as
    redis.call('publish', 'seawall:inval:' .. namespace, sender .. ':d:' .. key)
"""

from __future__ import annotations

from typing import Literal, NamedTuple

CHANNEL_PREFIX = "seawall:inval:"
PATTERN = CHANNEL_PREFIX + "*"
CLEARED_PREFIX = "seawall:cleared:"
CLEARED_PATTERN = CLEARED_PREFIX + "*"
AGAIN_PREFIX = "seawall:again:"
AGAIN_PATTERN = AGAIN_PREFIX + "*"

DISCARD: Literal["d"] = "d"
DISCARD_MANY: Literal["m"] = "m"
CLEAR: Literal["c"] = "c"
AGAIN: Literal["a"] = "a"
_OPS = (DISCARD, DISCARD_MANY, CLEAR, AGAIN)
SENDER_LENGTH = 32


class Message(NamedTuple):
    namespace: str
    sender: str
    op: Literal["d", "m", "c", "a"]
    key: str
    keys: tuple[str, ...] = ()  # for "m"


def channel(namespace: str) -> str:
    return CHANNEL_PREFIX + namespace


def cleared_channel(namespace: str) -> str:
    return CLEARED_PREFIX + namespace


def again_channel(namespace: str) -> str:
    return AGAIN_PREFIX + namespace


def due_in(message: Message) -> float | None:
    """Seconds until the second deletes an "a" message announces are due (None: not one)."""
    return int(message.key) / 1000 if message.op == AGAIN else None


def encode(sender: str, op: Literal["d", "c"], key: str = "") -> str:
    return f"{sender}:{op}:{key}"


def encode_many(sender: str, keys: list[str]) -> str:
    """One message that drops every key of `keys` ("d" for a single one)."""
    if len(keys) == 1:
        return encode(sender, DISCARD, keys[0])
    return f"{sender}:{DISCARD_MANY}:" + "".join(f"{len(key)}:{key}" for key in keys)


def _split_keys(text: str) -> tuple[str, ...] | None:
    """The keys of an "m" message (None if malformed)."""
    keys = []
    at = 0
    while at < len(text):
        colon = text.find(":", at)
        length = text[at:colon]
        if colon < 0 or not (length.isascii() and length.isdigit()):
            return None
        end = colon + 1 + int(length)
        if end > len(text):
            return None
        keys.append(text[colon + 1 : end])
        at = end
    return tuple(keys)


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
    if not (sep1 and sep2) or len(sender) != SENDER_LENGTH or op not in _OPS:
        return None
    if name.startswith(AGAIN_PREFIX):
        if op != AGAIN or not (key.isascii() and key.isdigit()):
            return None
        return Message(name[len(AGAIN_PREFIX) :], sender, AGAIN, key)
    if op == AGAIN:
        return None  # only ever on its own channel
    if name.startswith(CLEARED_PREFIX):
        if op != CLEAR or not (key.isascii() and key.isdigit()):
            return None  # a clear that names no generation: the caller clears everything
        return Message(name[len(CLEARED_PREFIX) :], sender, CLEAR, key)
    if not name.startswith(CHANNEL_PREFIX):
        return None
    namespace = name[len(CHANNEL_PREFIX) :]
    if op == CLEAR:
        return Message(namespace, sender, CLEAR, "")  # the L1s only
    if op == DISCARD_MANY:
        keys = _split_keys(key)
        return None if keys is None else Message(namespace, sender, DISCARD_MANY, "", keys)
    return Message(namespace, sender, DISCARD, key)
