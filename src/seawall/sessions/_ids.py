"""Session ids and the Redis keys they map to. No I/O.

An id is "<tag>.<secret>": `tag` (4 url-safe characters) picks the Redis Cluster slot;
`secret` (43 characters, 256 random bits from `secrets.token_urlsafe(32)`) is new each
time and is the whole of the id's strength. An anonymous session's tag is random (24
bits) and kept when the id is regenerated, so the old and the new hash share a slot and
regenerate() is one atomic script. A session bound to a user has its user's tag (derived
from the user id), the tag of the user's index too: saving the session and indexing it
for logout_everywhere() are one script, and so is the logout.

The key holds a SHA-256 digest of the secret, never the secret: key names show up in
`seawall bigkeys`, `MONITOR`, slow logs and backups, and a key name must not be a
working cookie.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets

TAG_LENGTH = 4
SECRET_BYTES = 32
_ID = re.compile(r"[A-Za-z0-9_-]{4}\.[A-Za-z0-9_-]{43}")


def new_id(tag: str | None = None) -> str:
    """A fresh id; `tag` keeps the slot of a session being regenerated."""
    if tag is None:
        tag = secrets.token_urlsafe(3)
    return f"{tag}.{secrets.token_urlsafe(SECRET_BYTES)}"


def is_valid(session_id: str) -> bool:
    """Whether `session_id` has the shape of an id seawall issues (a forged or truncated
    cookie is never looked up)."""
    return _ID.fullmatch(session_id) is not None


def tag_of(session_id: str) -> str:
    return session_id[:TAG_LENGTH]


def handle(session_id: str) -> str:
    """What Redis stores about an id: its tag and the digest of its secret."""
    tag, secret = session_id.split(".", 1)
    return f"{tag}.{hashlib.sha256(secret.encode()).hexdigest()[:40]}"


def key_of_handle(prefix: str, session_handle: str) -> str:
    tag, digest = session_handle.split(".", 1)
    return f"{prefix}:{{{tag}}}:{digest}"


def key(prefix: str, session_id: str) -> str:
    """The hash of session `session_id`: "<prefix>:{<tag>}:<digest>"."""
    return key_of_handle(prefix, handle(session_id))


def user_tag(user_id: str) -> str:
    """The tag of `user_id`'s sessions and index: 24 bits of a digest of the id."""
    digest = hashlib.sha256(user_id.encode()).digest()[:3]
    return base64.urlsafe_b64encode(digest).decode()


def user_index_key(prefix: str, user_id: str) -> str:
    """The set of a user's session handles, in the slot of the user's sessions."""
    return f"{prefix}:user:{{{user_tag(user_id)}}}:{user_id}"
