"""Key rules, over the doctor's key sample: big keys, keys without a TTL, long names."""

from __future__ import annotations

from collections.abc import Iterator

from seawall.ops.doctor._keyfacts import OTHER
from seawall.ops.doctor._model import ALIBABA, Yielded, rule
from seawall.ops.doctor._snapshot import Snapshot

NAMED = 10  # keys named per finding; the rest are counted


@rule("SD020", "big-keys", ALIBABA + ": strings <= 10 KB, collections <= 5,000 elements")
def big_keys(snapshot: Snapshot) -> Iterator[Yielded]:
    """A big key makes every command on it slow (HGETALL of 100,000 fields), its deletion
    or expiry block the server (without lazy freeing), it cannot be spread over a Cluster
    and it makes one node's memory and network the bottleneck.

    Fix: split it (hash by field into N keys: `key:{n}`), page through it with
    HSCAN/SSCAN/ZSCAN, and delete it with UNLINK (`seawall delete --pattern KEY`).
    """
    for node in snapshot.nodes:
        facts = node.facts
        for big in facts.big.items()[:NAMED]:
            yield (
                "warning",
                f"big key on {node.address}: {big.describe()}",
                ("split it into smaller keys; delete with UNLINK"),
                node.address,
            )
        if facts.big_count > NAMED:
            yield (
                "warning",
                f"{facts.big_count - NAMED:,} more big keys on {node.address}",
                ("run `seawall bigkeys` for the full list"),
                node.address,
            )


@rule("SD021", "no-ttl", ALIBABA + ": give cache keys an expiry time")
def no_ttl(snapshot: Snapshot) -> Iterator[Yielded]:
    """Cache keys without a TTL stay until evicted, so stale data lives forever and memory
    fills up; under a volatile-* eviction policy they can never be evicted at all. Reported
    per key prefix (`user:*`), as the share of its keys that have no TTL.

    Fix: set a TTL on every cache write (SET key value EX n, seawall.Cache(ttl=...)).
    """
    for node in snapshot.nodes:
        policy = (node.config or {}).get("maxmemory-policy", "")
        ranked = sorted(node.facts.ttl.items(), key=lambda kv: -kv[1][1])
        for family, (total, without) in ranked[:NAMED]:
            if not without or family == OTHER:
                continue
            severity = "warning" if policy.startswith("volatile") else "info"
            yield (
                severity,  # type: ignore[misc]
                f"{without:,} of {total:,} keys {family} on {node.address} have no TTL "
                f"({100 * without / total:.0f} %)"
                + (f"; policy {policy} never evicts them" if severity == "warning" else ""),
                "set an expiry on every write of these keys",
                node.address,
            )


@rule("SD022", "long-key-names", ALIBABA + ": keep key names short and readable")
def long_names(snapshot: Snapshot) -> Iterator[Yielded]:
    """A key name is stored in full with the key and sent with every command; a name over
    128 bytes (often a serialized object or a URL used as a key) wastes memory and
    bandwidth on every access.

    Fix: hash the long part (`seawall.Cache` hashes long argument keys), or shorten it.
    """
    for node in snapshot.nodes:
        for key in node.facts.long_names[:NAMED]:
            yield (
                "info",
                f"key name of {len(key.encode())} bytes on {node.address}: {_ends(key)}",
                ("shorten it or hash its long part"),
                node.address,
            )


def _ends(key: str) -> str:
    """A long name by its two ends: names that share a long prefix (a URL, a serialized
    object) stay told apart by their tails."""
    return key if len(key) <= 80 else f"{key[:48]}...{key[-24:]}"
