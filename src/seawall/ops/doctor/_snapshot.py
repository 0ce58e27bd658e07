"""Everything the doctor's rules look at, read once from the server (the only I/O).

Rules are pure functions of a `Snapshot`. What the server refuses to show (CONFIG renamed,
ACL denying SLOWLOG) is recorded as missing, and the rules that need it say so instead of
guessing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis

from seawall.ops._connect import Node, Target, command, guard, info_text, parse_cluster_nodes
from seawall.ops._info import parse_info
from seawall.ops._output import text_key
from seawall.ops._pipeline import encode, present_commands, run_raw
from seawall.ops._rate import Limiter
from seawall.ops._scan import Scan
from seawall.ops.bigkeys import LENGTH_COMMANDS
from seawall.ops.doctor._keyfacts import KeyFacts

__all__ = ["DANGEROUS", "NodeSnapshot", "Snapshot", "collect"]

DANGEROUS = ("KEYS", "FLUSHALL", "FLUSHDB", "CONFIG", "DEBUG")
_DRYRUN_ARGS = {"KEYS": ["*"], "CONFIG": ["GET", "maxmemory"], "DEBUG": ["SLEEP", "0"]}
# Collections this big or strings this long are worth an exact length check.
_LENGTH_FLOOR = 5000


@dataclass
class NodeSnapshot:
    address: str
    info: dict[str, Any]
    config: dict[str, str] | None  # None: CONFIG GET refused
    commands: dict[str, bool]  # dangerous command -> present (not renamed away)
    users_allowed: dict[str, list[str]]  # dangerous command -> ACL users who may run it
    slowlog: list[dict[str, Any]] | None
    memory_doctor: str | None
    latency_doctor: str | None
    latency_latest: list[Any] | None
    clients: list[dict[str, str]]
    facts: KeyFacts = field(default_factory=KeyFacts)
    dbsize: int = 0


@dataclass
class Snapshot:
    url: str
    cluster: bool
    nodes: list[NodeSnapshot]
    cluster_nodes: list[dict[str, Any]] = field(default_factory=list)
    cluster_info: dict[str, Any] = field(default_factory=dict)


def _soft(call: Any) -> Any:
    """The reply, or None when the server refuses (renamed, denied, unknown command)."""
    try:
        return call()
    except redis.ResponseError:
        return None


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, list):
        return "\n".join(_text(v) for v in value)
    return str(value)


def _parse_client_list(text: str) -> list[dict[str, str]]:
    return [
        dict(part.split("=", 1) for part in line.split() if "=" in part)
        for line in text.splitlines()
        if line.strip()
    ]


def _acl(client: redis.Redis) -> dict[str, list[str]]:
    users = _soft(lambda: command(client, "ACL", "USERS"))
    if not users:
        return {}  # ACL unknown (older server) or denied: rules fall back to "anyone"
    out: dict[str, list[str]] = {name: [] for name in DANGEROUS}
    for user in (text_key(u) for u in users):
        if not _enabled(client, user):
            continue  # a user that is off cannot log in
        for name in DANGEROUS:
            reply = _soft(
                lambda u=user, n=name: command(
                    client,
                    "ACL",
                    "DRYRUN",
                    u,
                    n,
                    *_DRYRUN_ARGS.get(n, []),
                )
            )
            if reply in (b"OK", "OK", True):
                out[name].append(user)
    return out


def _enabled(client: redis.Redis, user: str) -> bool:
    reply = _soft(lambda: command(client, "ACL", "GETUSER", user))
    if isinstance(reply, list):  # RESP2: a flat name/value list
        reply = dict(zip(reply[::2], reply[1::2], strict=False))
    if not isinstance(reply, dict):
        return True
    flags = reply.get("flags", reply.get(b"flags")) or []
    return "off" not in {text_key(f) for f in flags}


def _scan_keys(scan: Scan, facts_of: dict[str, KeyFacts], on_batch: Callable[[int], None]) -> None:
    for node, keys in scan.batches():
        facts = facts_of[node.address]
        scan.limiter.take(3 * len(keys))
        commands = []
        for key in keys:
            commands += [
                encode(b"TYPE", key),
                encode(b"MEMORY", b"USAGE", key, b"SAMPLES", b"5"),
                encode(b"PTTL", key),
            ]
        replies = run_raw(node, commands)
        rows = [
            (key, _text(replies[3 * i]), replies[3 * i + 1], replies[3 * i + 2])
            for i, key in enumerate(keys)
        ]
        # Exact lengths only where a rule may fire: one byte per element at the least.
        wanted = [
            (key, kind)
            for key, kind, size, _ in rows
            if kind != "none" and isinstance(size, int) and size >= _LENGTH_FLOOR
        ]
        replies = run_raw(node, [_length_command(k, t) for k, t in wanted]) if wanted else []
        lengths = dict(zip([k for k, _ in wanted], replies, strict=True))
        for key, kind, size, ttl in rows:
            if kind == "none" or not isinstance(size, int):
                continue  # deleted since the SCAN
            length = lengths.get(key)
            facts.add(
                text_key(key),
                kind,
                size,
                length if isinstance(length, int) else None,
                int(ttl) if isinstance(ttl, int) else -1,
            )
        on_batch(scan.done_estimate())


def _length_command(key: bytes, kind: str) -> bytes:
    return encode(LENGTH_COMMANDS.get(kind, "STRLEN").encode(), key)


def _node(node: Node) -> NodeSnapshot:
    client = node.client
    info = parse_info(guard(info_text, node.address, client, "everything"))
    config = _soft(lambda: client.config_get("*"))
    commands = present_commands(node, DANGEROUS)
    slowlog = _soft(lambda: client.slowlog_get(128))
    clients = _soft(lambda: command(client, "CLIENT", "LIST"))
    return NodeSnapshot(
        address=node.address,
        info=info,
        config=None if config is None else {text_key(k): text_key(v) for k, v in config.items()},
        commands=commands,
        users_allowed=_acl(client),
        slowlog=slowlog,
        memory_doctor=_opt_text(_soft(lambda: command(client, "MEMORY", "DOCTOR"))),
        latency_doctor=_opt_text(_soft(lambda: command(client, "LATENCY", "DOCTOR"))),
        latency_latest=_soft(lambda: command(client, "LATENCY", "LATEST")),
        clients=_parse_client_list(_text(clients)) if clients is not None else [],
        dbsize=int(guard(client.dbsize, node.address)),
    )


def _opt_text(value: Any) -> str | None:
    return None if value is None else _text(value)


def collect(
    target: Target,
    *,
    keys: bool = True,
    max_ops: float | None = None,
    on_batch: Callable[[int], None] = lambda done: None,
) -> Snapshot:
    """Read the snapshot of every master; with `keys`, scan all their keys (at most
    `max_ops` ops/s) for the key rules."""
    nodes = [_node(node) for node in target.masters]
    if keys:
        scan = Scan(target.masters, cluster=target.cluster, limiter=Limiter(max_ops))
        _scan_keys(scan, {n.address: n.facts for n in nodes}, on_batch)
    snapshot = Snapshot(target.url, target.cluster, nodes)
    if target.cluster:
        first = target.masters[0]
        text = guard(command, first.address, first.client, "CLUSTER", "NODES")
        snapshot.cluster_nodes = parse_cluster_nodes(_text(text))
        raw = guard(command, first.address, first.client, "CLUSTER", "INFO")
        snapshot.cluster_info = parse_info(_text(raw))
    return snapshot
