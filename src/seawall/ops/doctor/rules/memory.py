"""Memory rules: a limit, an eviction policy, lazy freeing, fragmentation, MEMORY DOCTOR."""

from __future__ import annotations

from collections.abc import Iterator

from seawall.ops._info import number
from seawall.ops.doctor._model import ALIBABA, Yielded, rule
from seawall.ops.doctor._snapshot import Snapshot

_NO_CONFIG = "CONFIG GET is renamed or denied for this user: settings were not checked"
LAZYFREE = ("lazyfree-lazy-eviction", "lazyfree-lazy-expire", "lazyfree-lazy-server-del")
_FRAG_MIN_BYTES = 100 * 1024 * 1024  # below this, allocator overhead makes ratios meaningless


@rule("SD001", "maxmemory-unset", ALIBABA + ": set maxmemory (about 3/4 of the machine's RAM)")
def maxmemory(snapshot: Snapshot) -> Iterator[Yielded]:
    """With maxmemory 0 the server grows until the kernel's OOM killer ends it (or it
    swaps, and every command slows down). A cache must have a limit for its eviction
    policy to act at all.

    Fix: `CONFIG SET maxmemory 6gb` (and in redis.conf), about three quarters of the RAM
    left to the server, leaving room for fork copy-on-write during persistence.
    """
    for node in snapshot.nodes:
        if node.config is None:
            yield (
                "info",
                _NO_CONFIG,
                "give the doctor a user allowed to run CONFIG GET",
                node.address,
            )
        elif node.config.get("maxmemory", "0") == "0":
            yield (
                "error",
                f"maxmemory is 0 (no limit) on {node.address}: the server grows until it is "
                "killed for lack of memory",
                "CONFIG SET maxmemory <3/4 of RAM> and put it in redis.conf",
                node.address,
            )


@rule("SD002", "eviction-policy", ALIBABA + ": choose maxmemory-policy to fit the workload")
def eviction(snapshot: Snapshot) -> Iterator[Yielded]:
    """With a limit and `noeviction`, every write fails with OOM once memory is full: right
    for a database, wrong for a cache. `volatile-*` policies only evict keys with a TTL.

    Fix: a cache: `CONFIG SET maxmemory-policy allkeys-lfu` (or allkeys-lru); a store
    whose data must never be dropped: keep noeviction and alert on used memory.
    """
    for node in snapshot.nodes:
        if node.config is None or node.config.get("maxmemory", "0") == "0":
            continue
        policy = node.config.get("maxmemory-policy", "")
        if policy == "noeviction":
            yield (
                "warning",
                f"maxmemory-policy is noeviction on {node.address}: writes fail with OOM "
                "when memory is full",
                "for a cache: CONFIG SET maxmemory-policy allkeys-lfu",
                node.address,
            )


@rule("SD003", "lazyfree-off", ALIBABA + ": free memory lazily (lazyfree-*, UNLINK)")
def lazyfree(snapshot: Snapshot) -> Iterator[Yielded]:
    """With lazy freeing off, the main thread frees an evicted, expired or overwritten big
    key itself, and every client waits meanwhile (a 1 M element hash takes about a second).

    Fix: `CONFIG SET lazyfree-lazy-eviction yes` (and -expire, -server-del,
    lazyfree-lazy-user-del): the memory is freed in a background thread.
    """
    for node in snapshot.nodes:
        if node.config is None:
            continue
        off = [name for name in LAZYFREE if node.config.get(name) == "no"]
        if off:
            yield (
                "warning",
                f"lazy freeing is off on {node.address} ({', '.join(off)}): freeing a big key "
                "blocks the server",
                "; ".join(f"CONFIG SET {name} yes" for name in off),
                node.address,
            )


@rule("SD004", "fragmentation", "Redis memory optimization: keep mem_fragmentation_ratio 1-1.5")
def fragmentation(snapshot: Snapshot) -> Iterator[Yielded]:
    """A fragmentation ratio (RSS / used memory) above 1.5 wastes RAM the server holds but
    cannot use; below 1 means part of the data set is swapped out, and every access to it
    costs a disk read. Small data sets are skipped: their ratio is allocator overhead.

    Fix: over 1.5: `CONFIG SET activedefrag yes` (jemalloc builds) or a restart/failover;
    under 1: add RAM or lower maxmemory, and disable swap for the server.
    """
    for node in snapshot.nodes:
        used = number(node.info, "used_memory")
        ratio = number(node.info, "mem_fragmentation_ratio", 1.0)
        if used < _FRAG_MIN_BYTES:
            continue
        if ratio > 1.5:
            yield (
                "warning",
                f"mem_fragmentation_ratio is {ratio:.2f} on {node.address}",
                "CONFIG SET activedefrag yes",
                node.address,
            )
        elif ratio < 1.0:
            yield (
                "error",
                f"mem_fragmentation_ratio is {ratio:.2f} on {node.address}: part of the data "
                "is swapped out",
                "add RAM or lower maxmemory; disable swap for the server",
                node.address,
            )


@rule("SD005", "memory-doctor", "the server's own MEMORY DOCTOR advice")
def memory_doctor(snapshot: Snapshot) -> Iterator[Yielded]:
    """MEMORY DOCTOR looks at the allocator's own figures (peak vs used, RSS overhead,
    big client buffers) and says what it sees; any advice it gives is passed on.

    Fix: what the advice says.
    """
    quiet = ("can't find any memory issue", "empty or is using very little memory")
    for node in snapshot.nodes:
        text = node.memory_doctor
        if text and not any(q in text for q in quiet):
            yield (
                "warning",
                f"MEMORY DOCTOR on {node.address}: {' '.join(text.split())}",
                ("follow MEMORY DOCTOR's advice"),
                node.address,
            )
