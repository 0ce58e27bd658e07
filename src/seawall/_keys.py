"""Key naming. Every key of one primitive shares one hash tag, so its scripts run on Cluster."""

from __future__ import annotations

from dataclasses import dataclass

PREFIX = "seawall"


def hash_tag(key: str) -> str | None:
    """The part of `key` Redis Cluster hashes, or None when the whole key is hashed.

    Redis's rule: the text between the first "{" and the first "}" after it, if non-empty.
    """
    start = key.find("{")
    if start < 0:
        return None
    end = key.find("}", start + 1)
    if end < 0 or end == start + 1:
        return None
    return key[start + 1 : end]


def tagged(kind: str, name: str) -> str:
    """The base key for primitive `kind` named `name`; suffixes keep its hash slot.

    Distinct names always give distinct keys: the character after "seawall:<kind>:" says
    which of three forms follows.
    - "{name}": the usual form; the name is the hash tag.
    - "#name": the name carries its own hash tag, which is kept so users can co-locate a
      lock with the keys it protects.
    - "~{~}name": the name starts with "}", which would make an empty tag (whole-key
      hashing, so suffixed keys would scatter across slots); these share the tag "~".
    """
    if hash_tag(name) is not None:
        return f"{PREFIX}:{kind}:#{name}"
    if name.startswith("}"):
        return f"{PREFIX}:{kind}:~{{~}}{name}"
    return f"{PREFIX}:{kind}:{{{name}}}"


@dataclass(frozen=True, slots=True)
class LockKeys:
    key: str  # holds the owner's token while held
    fence: str  # counter, INCRed on every acquisition; never expires
    channel: str  # pub/sub channel that announces releases


def lock_keys(name: str) -> LockKeys:
    base = tagged("lock", name)
    return LockKeys(key=base, fence=f"{base}:fence", channel=f"{base}:released")
