"""`seawall stats`: a server's health in one table, from INFO (pure arithmetic over parsed
INFO; the only I/O is `sample`).

On a Cluster every master is sampled and the figures are summed (hits, ops/s, memory,
evictions, clients) or taken at the worst node (fragmentation, replication lag); the
per-node rows are in `nodes`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from seawall.ops._connect import Target, guard, info_text
from seawall.ops._info import number, parse_info

__all__ = ["Sample", "commands", "hit_rate", "sample", "summarize"]

TOP_COMMANDS = 10


@dataclass(frozen=True)
class Sample:
    address: str
    role: str
    info: dict[str, Any]
    at: float


def sample(target: Target) -> list[Sample]:
    out = []
    for node in target.nodes:
        raw = guard(info_text, node.address, node.client, "everything")
        out.append(Sample(node.address, node.role, parse_info(raw), time.monotonic()))
    return out


def hit_rate(hits: float, misses: float) -> float | None:
    """keyspace_hits / (hits + misses); None before the first read."""
    return hits / (hits + misses) if hits + misses else None


def commands(info: dict[str, Any]) -> dict[str, dict[str, float]]:
    """INFO commandstats as command -> {calls, usec}; `cmdstat_client|list` -> `client|list`."""
    out: dict[str, dict[str, float]] = {}
    for name, value in info.items():
        if name.startswith("cmdstat_") and isinstance(value, dict):
            out[name[len("cmdstat_") :]] = {
                "calls": float(value.get("calls", 0)),
                "usec": float(value.get("usec", 0)),
            }
    return out


def replication(info: dict[str, Any], address: str) -> list[dict[str, Any]]:
    """Lag of each replica of a master (bytes behind, seconds since its last ack), or of
    this replica itself (seconds since its master last spoke, link state)."""
    rows: list[dict[str, Any]] = []
    if info.get("role") == "slave":
        rows.append(
            {
                "replica": address,
                "master": f"{info.get('master_host')}:{info.get('master_port')}",
                "link": info.get("master_link_status"),
                "lag_bytes": None,
                "lag_seconds": info.get("master_last_io_seconds_ago"),
            }
        )
        return rows
    offset = number(info, "master_repl_offset")
    for index in range(int(number(info, "connected_slaves"))):
        entry = info.get(f"slave{index}")
        if not isinstance(entry, dict):
            continue
        rows.append(
            {
                "replica": f"{entry.get('ip')}:{entry.get('port')}",
                "master": address,
                "link": entry.get("state"),
                "lag_bytes": max(0, int(offset - float(entry.get("offset", 0)))),
                "lag_seconds": entry.get("lag"),
            }
        )
    return rows


def _node_figures(current: Sample, previous: Sample | None) -> dict[str, Any]:
    info = current.info
    ops = number(info, "instantaneous_ops_per_sec")
    if previous is not None and current.at > previous.at:
        done = number(info, "total_commands_processed") - number(
            previous.info, "total_commands_processed"
        )
        ops = max(0.0, done / (current.at - previous.at))
    keys = sum(
        int(v.get("keys", 0))
        for k, v in info.items()
        if k.startswith("db") and k[2:].isdigit() and isinstance(v, dict)
    )
    return {
        "address": current.address,
        "role": current.role,
        "version": info.get("valkey_version", info.get("redis_version")),
        "hits": int(number(info, "keyspace_hits")),
        "misses": int(number(info, "keyspace_misses")),
        "hit_rate": hit_rate(number(info, "keyspace_hits"), number(info, "keyspace_misses")),
        "ops_per_sec": round(ops, 1),
        "used_memory": int(number(info, "used_memory")),
        "used_memory_peak": int(number(info, "used_memory_peak")),
        "maxmemory": int(number(info, "maxmemory")),
        "fragmentation_ratio": number(info, "mem_fragmentation_ratio"),
        "evicted_keys": int(number(info, "evicted_keys")),
        "expired_keys": int(number(info, "expired_keys")),
        "connected_clients": int(number(info, "connected_clients")),
        "blocked_clients": int(number(info, "blocked_clients")),
        "keys": keys,
    }


def _top(table: dict[str, dict[str, float]], by: str) -> list[dict[str, Any]]:
    ranked = sorted(table.items(), key=lambda kv: (-kv[1][by], kv[0]))[:TOP_COMMANDS]
    return [
        {
            "command": name,
            "calls": int(fig["calls"]),
            "usec": int(fig["usec"]),
            "usec_per_call": round(fig["usec"] / fig["calls"], 2) if fig["calls"] else 0.0,
        }
        for name, fig in ranked
        if fig[by] > 0
    ]


def summarize(samples: list[Sample], previous: list[Sample] | None = None) -> dict[str, Any]:
    """The figures `seawall stats --json` prints, summed over the sampled nodes."""
    before = {s.address: s for s in previous or []}
    nodes = [_node_figures(s, before.get(s.address)) for s in samples]
    hits = sum(n["hits"] for n in nodes)
    misses = sum(n["misses"] for n in nodes)
    merged: dict[str, dict[str, float]] = {}
    for s in samples:
        for name, fig in commands(s.info).items():
            slot = merged.setdefault(name, {"calls": 0.0, "usec": 0.0})
            slot["calls"] += fig["calls"]
            slot["usec"] += fig["usec"]
    lags = [row for s in samples for row in replication(s.info, s.address)]
    return {
        "hit_rate": hit_rate(hits, misses),
        "keyspace_hits": hits,
        "keyspace_misses": misses,
        "ops_per_sec": round(sum(n["ops_per_sec"] for n in nodes), 1),
        "used_memory": sum(n["used_memory"] for n in nodes),
        "used_memory_peak": sum(n["used_memory_peak"] for n in nodes),
        "maxmemory": sum(n["maxmemory"] for n in nodes),
        "fragmentation_ratio": max((n["fragmentation_ratio"] for n in nodes), default=0.0),
        "evicted_keys": sum(n["evicted_keys"] for n in nodes),
        "expired_keys": sum(n["expired_keys"] for n in nodes),
        "connected_clients": sum(n["connected_clients"] for n in nodes),
        "keys": sum(n["keys"] for n in nodes),
        "top_commands_by_calls": _top(merged, "calls"),
        "top_commands_by_time": _top(merged, "usec"),
        "replication": lags,
        "max_replication_lag_bytes": max(
            (r["lag_bytes"] for r in lags if r["lag_bytes"] is not None), default=None
        ),
        "nodes": nodes,
    }
