"""Command rules: dangerous commands, the slow log, latency events."""

from __future__ import annotations

from collections.abc import Iterator

from seawall.ops.doctor._model import ALIBABA, Yielded, rule
from seawall.ops.doctor._snapshot import DANGEROUS, Snapshot

# Commands whose cost grows with the data: in the slow log they name a design problem.
O_N = {
    "keys", "hgetall", "smembers", "lrange", "zrange", "zrangebyscore", "zrevrange",
    "sunion", "sinter", "sdiff", "sunionstore", "sinterstore", "sdiffstore", "sort",
    "flushall", "flushdb", "del", "hkeys", "hvals", "zunionstore", "zinterstore", "lrem",
}  # fmt: skip
_ERRORS = {"KEYS", "FLUSHALL", "FLUSHDB"}


@rule("SD010", "dangerous-commands", ALIBABA + ": rename or deny KEYS, FLUSHALL, FLUSHDB, CONFIG")
def dangerous(snapshot: Snapshot) -> Iterator[Yielded]:
    """KEYS walks the whole keyspace in one blocking call; FLUSHALL/FLUSHDB erase every
    key; CONFIG can change anything, including where the server writes files; DEBUG can
    crash or freeze it. Any client that can send them can take the server down by mistake.

    Fix: deny them by ACL for application users (`ACL SETUSER app -@dangerous`) or rename
    them away in redis.conf (`rename-command KEYS ""`); keep an admin user for CONFIG.
    """
    for node in snapshot.nodes:
        debug_off = (node.config or {}).get("enable-debug-command") == "no"
        open_to: list[str] = []
        for name in DANGEROUS:
            if not node.commands.get(name) or (name == "DEBUG" and debug_off):
                continue
            users = node.users_allowed.get(name) or []
            if users or not node.users_allowed:
                open_to.append(name)
                severity = "error" if name in _ERRORS else "warning"
                who = f"ACL users {', '.join(users)}" if users else "every client"
                yield (
                    severity,  # type: ignore[misc]
                    f"{name} is neither renamed nor denied on {node.address} ({who} may run it)",
                    f'ACL SETUSER <app user> -{name.lower()} (or rename-command {name} "")',
                    node.address,
                )


@rule("SD011", "slowlog-o-n", ALIBABA + ": avoid O(N) commands on big collections")
def slowlog(snapshot: Snapshot) -> Iterator[Yielded]:
    """An O(N) command (KEYS, HGETALL, SMEMBERS, LRANGE 0 -1, ...) in the slow log blocked
    every other client for its whole duration; one on a growing collection gets slower
    every day.

    Fix: SCAN, HSCAN, SSCAN, ZSCAN in pages; LRANGE with bounds; split big collections.
    """
    for node in snapshot.nodes:
        if node.slowlog is None:
            yield (
                "info",
                f"SLOWLOG is denied on {node.address}: not checked",
                ("give the doctor a user allowed to run SLOWLOG GET"),
                node.address,
            )
            continue
        seen: dict[str, tuple[int, str]] = {}
        for entry in node.slowlog:
            raw = entry.get("command", b"")
            text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
            name = text.split(" ", 1)[0].lower()
            if name in O_N:
                worst = seen.get(name)
                duration = int(entry.get("duration", 0))
                if worst is None or duration > worst[0]:
                    seen[name] = (duration, text[:80])
        for name, (duration, text) in sorted(seen.items()):
            yield (
                "warning",
                f"slow log on {node.address}: `{text}` took {duration / 1000:.1f} ms "
                f"({name.upper()} is O(N))",
                "page through with SCAN/HSCAN/SSCAN/ZSCAN or bounded ranges",
                node.address,
            )


@rule("SD012", "latency", "the server's own LATENCY DOCTOR advice")
def latency(snapshot: Snapshot) -> Iterator[Yielded]:
    """LATENCY LATEST lists the events (fork, expire-cycle, command, aof-fsync) that took
    longer than latency-monitor-threshold; LATENCY DOCTOR explains them. With the monitor
    off (threshold 0) nothing is recorded.

    Fix: `CONFIG SET latency-monitor-threshold 100` to record; then what LATENCY DOCTOR says.
    """
    for node in snapshot.nodes:
        threshold = (node.config or {}).get("latency-monitor-threshold")
        if threshold == "0":
            yield (
                "info",
                f"the latency monitor is off on {node.address}: latency spikes are not recorded",
                "CONFIG SET latency-monitor-threshold 100",
                node.address,
            )
        for event in node.latency_latest or []:
            name = event[0].decode() if isinstance(event[0], bytes) else str(event[0])
            advice = " ".join((node.latency_doctor or "").split())[:300]
            yield (
                "warning",
                f"latency event {name!r} on {node.address}: up to {event[3]} ms",
                advice or "run LATENCY DOCTOR on the server",
                node.address,
            )
