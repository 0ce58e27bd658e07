"""`seawall delete --pattern`: delete every matching key without blocking the server.

Matching keys are deleted a SCAN batch at a time, each batch under the rate limit, with
UNLINK: the server takes the keys out of the keyspace at once and frees big values in a
background thread. Where UNLINK is missing (renamed away, denied, or a server older than
4.0) and `lazyfree-lazy-user-del` is off, DEL would free a big collection in one go and
stall every other client meanwhile, so a collection over `BIG` elements is first emptied
`CHUNK` elements at a time (HSCAN+HDEL, SPOP, ZREMRANGEBYRANK, LTRIM, XTRIM), then deleted.

On a Cluster a batch is grouped by hash slot: a multi-key command must stay in one slot.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from seawall.ops._connect import Node, command, guard
from seawall.ops._output import text_key
from seawall.ops._pipeline import encode, present_commands, run_raw
from seawall.ops._scan import Scan
from seawall.ops.bigkeys import LENGTH_COMMANDS
from seawall.ops.slots import key_slot

__all__ = ["BIG", "CHUNK", "DeleteReport", "choose_free", "delete", "free_mode"]

BIG = 512  # elements: past this, DEL of a collection is no longer a few microseconds
CHUNK = 256  # elements removed per step when emptying a collection incrementally
SAMPLE = 10  # matched keys listed by a dry run


def choose_free(unlink_available: bool, lazy_user_del: bool) -> str:
    """How a node frees keys: `unlink`, `del` (DEL is already lazy), or `incremental`."""
    if unlink_available:
        return "unlink"
    return "del" if lazy_user_del else "incremental"


def free_mode(node: Node) -> str:
    unlink = present_commands(node, ["UNLINK"])["UNLINK"]
    try:
        config: Any = node.client.config_get("lazyfree-lazy-user-del")
        lazy = text_key(next(iter(config.values()), b"no")) == "yes"
    except Exception:  # CONFIG renamed or denied: assume the blocking default
        lazy = False
    return choose_free(unlink, lazy)


@dataclass
class DeleteReport:
    matched: int = 0
    deleted: int = 0
    emptied: list[str] = field(default_factory=list)  # collections emptied step by step
    sample: list[str] = field(default_factory=list)
    modes: dict[str, str] = field(default_factory=dict)
    interrupted: bool = False
    cursor: str | None = None


def _groups(keys: list[bytes], cluster: bool) -> list[list[bytes]]:
    if not cluster:
        return [keys]
    by_slot: dict[int, list[bytes]] = {}
    for key in keys:
        by_slot.setdefault(key_slot(key), []).append(key)
    return list(by_slot.values())


def _remove(node: Node, keys: list[bytes], mode: str, cluster: bool) -> int:
    verb = b"UNLINK" if mode == "unlink" else b"DEL"
    replies = run_raw(node, [encode(verb, *group) for group in _groups(keys, cluster)])
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    return sum(int(r) for r in replies)


def _empty_step(key: bytes, kind: str, length: int) -> list[bytes]:
    """The command that removes up to CHUNK elements of a set, zset, list or stream."""
    if kind == "set":
        return [b"SPOP", key, b"%d" % CHUNK]
    if kind == "zset":
        return [b"ZREMRANGEBYRANK", key, b"0", b"%d" % (CHUNK - 1)]
    if kind == "list":
        return [b"LTRIM", key, b"0", b"%d" % -(CHUNK + 1)]
    return [b"XTRIM", key, b"MAXLEN", b"%d" % max(0, length - CHUNK)]


def _empty(node: Node, key: bytes, kind: str, length: int, take: Callable[[int], None]) -> None:
    cursor = 0
    while length > BIG:
        take(CHUNK)
        if kind == "hash":
            # No pop command for hashes: page through with HSCAN (following its cursor:
            # the first buckets are empty once their fields are gone) and HDEL each page.
            reply: Any = guard(node.client.hscan, node.address, key, cursor, count=CHUNK)
            cursor, fields = int(reply[0]), list(reply[1])
            if fields:
                guard(command, node.address, node.client, b"HDEL", key, *fields)
        else:
            guard(command, node.address, node.client, *_empty_step(key, kind, length))
        reply = guard(command, node.address, node.client, LENGTH_COMMANDS[kind], key)
        length = int(reply)


def _big_collections(node: Node, keys: list[bytes]) -> list[tuple[bytes, str, int]]:
    types = run_raw(node, [encode(b"TYPE", key) for key in keys])
    kinds = [text_key(t) if isinstance(t, bytes) else "none" for t in types]
    lengths = run_raw(
        node,
        [
            encode(LENGTH_COMMANDS.get(kind, "STRLEN").encode(), key)
            for key, kind in zip(keys, kinds, strict=True)
        ],
    )
    return [
        (key, kind, length)
        for key, kind, length in zip(keys, kinds, lengths, strict=True)
        if kind not in ("string", "none") and isinstance(length, int) and length > BIG
    ]


def delete(
    scan: Scan,
    *,
    dry_run: bool,
    incremental: bool = False,
    on_batch: Callable[[int], None] = lambda done: None,
) -> DeleteReport:
    """Delete what `scan` matches (or only count it with `dry_run`)."""
    report = DeleteReport()
    if not dry_run:
        for node in scan.nodes:
            report.modes[node.address] = "incremental" if incremental else free_mode(node)
    try:
        for node, keys in scan.batches():
            report.matched += len(keys)
            if len(report.sample) < SAMPLE:
                report.sample.extend(text_key(k) for k in keys[: SAMPLE - len(report.sample)])
            if dry_run:
                on_batch(scan.done_estimate())
                continue
            mode = report.modes[node.address]
            if mode == "incremental":
                scan.limiter.take(2 * len(keys))
                for key, kind, length in _big_collections(node, keys):
                    _empty(node, key, kind, length, scan.limiter.take)
                    report.emptied.append(text_key(key))
            scan.limiter.take(len(keys))
            report.deleted += _remove(
                node, keys, "del" if mode == "incremental" else mode, scan.cluster
            )
            on_batch(scan.done_estimate())
    except KeyboardInterrupt:
        report.interrupted = True
        report.cursor = scan.resume_token()
    return report


def summary(report: DeleteReport, pattern: str) -> dict[str, Any]:
    return {
        "pattern": pattern,
        "matched": report.matched,
        "deleted": report.deleted,
        "emptied_incrementally": report.emptied,
        "free": report.modes,
        "sample": report.sample,
        "interrupted": report.interrupted,
        "cursor": report.cursor,
    }
