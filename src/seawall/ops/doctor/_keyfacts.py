"""What the key rules need from a scan of every key, in bounded memory.

The doctor looks at every key (big keys must be named, not guessed from a sample), so it
keeps only summaries: the biggest offenders (a heap), per-prefix TTL counts (at most
`PREFIXES` prefixes; later ones are lumped together) and a few long names.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from seawall.ops._sizes import TopN

__all__ = ["BIG_COLLECTION", "BIG_STRING", "LONG_NAME", "KeyFacts", "prefix"]

BIG_STRING = 10 * 1024  # bytes
BIG_COLLECTION = 5000  # elements
LONG_NAME = 128  # bytes
PREFIXES = 1000
OTHER = "(other prefixes)"
KEPT = 100  # big keys and long names remembered by name


def prefix(key: str) -> str:
    """The key's family: up to its first `:` (`user:42:cart` -> `user:*`)."""
    head, sep, _ = key.partition(":")
    return f"{head}:*" if sep else key


@dataclass(frozen=True)
class BigKey:
    key: str
    type: str
    bytes: int
    length: int

    def describe(self) -> str:
        unit = "bytes" if self.type == "string" else "elements"
        return f"{self.key} ({self.type}, {self.length:,} {unit})"


@dataclass
class KeyFacts:
    examined: int = 0
    big: TopN[BigKey] = field(default_factory=lambda: TopN(KEPT))
    big_count: int = 0
    ttl: dict[str, list[int]] = field(default_factory=dict)  # prefix -> [keys, without TTL]
    long_names: list[str] = field(default_factory=list)
    long_count: int = 0

    def add(self, key: str, kind: str, size: int, length: int | None, ttl_ms: int) -> None:
        self.examined += 1
        limit = BIG_STRING if kind == "string" else BIG_COLLECTION
        if length is not None and length > limit:
            self.big_count += 1
            self.big.offer(size, BigKey(key, kind, size, length))
        family = prefix(key)
        if family not in self.ttl and len(self.ttl) >= PREFIXES:
            family = OTHER
        counts = self.ttl.setdefault(family, [0, 0])
        counts[0] += 1
        counts[1] += ttl_ms < 0
        if len(key.encode()) > LONG_NAME:
            self.long_count += 1
            if len(self.long_names) < KEPT:
                self.long_names.append(key)
