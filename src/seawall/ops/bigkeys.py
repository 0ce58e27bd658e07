"""`seawall bigkeys`: the keys that take the most memory, with per-type totals.

Each SCAN batch is followed by one pipeline of `TYPE` + `MEMORY USAGE key SAMPLES s` per
key: two round trips per batch of up to `count` keys (redis-cli --memkeys makes three per
10 keys). Only the N largest are kept (`TopN`), and their lengths (elements, or bytes for a
string) are asked for at the end, N commands in all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from seawall.ops._connect import Node
from seawall.ops._output import text_key
from seawall.ops._pipeline import encode, run_raw
from seawall.ops._scan import Scan
from seawall.ops._sizes import TopN, TypeTotals

__all__ = ["LENGTH_COMMANDS", "BigKey", "Report", "lengths", "measure"]

# The command that gives a key's length: elements, or bytes for a string.
LENGTH_COMMANDS = {
    "string": "STRLEN",
    "list": "LLEN",
    "set": "SCARD",
    "zset": "ZCARD",
    "hash": "HLEN",
    "stream": "XLEN",
}


@dataclass
class BigKey:
    key: bytes
    type: str
    bytes: int
    node: str
    length: int | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "key": text_key(self.key),
            "type": self.type,
            "bytes": self.bytes,
            "length": self.length,
            "node": self.node,
        }


@dataclass
class Report:
    top: list[BigKey]
    totals: TypeTotals
    scanned: int
    interrupted: bool = False
    cursor: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _measure_batch(node: Node, keys: list[bytes], samples: int) -> list[tuple[str, Any]]:
    tail = b"$7\r\nSAMPLES\r\n" + b"$%d\r\n%d\r\n" % (len(str(samples)), samples)
    commands = []
    for key in keys:
        name = b"$%d\r\n%s\r\n" % (len(key), key)
        commands.append(b"*2\r\n$4\r\nTYPE\r\n" + name)
        commands.append(b"*5\r\n$6\r\nMEMORY\r\n$5\r\nUSAGE\r\n" + name + tail)
    replies = run_raw(node, commands)
    return [(_text(replies[index]), replies[index + 1]) for index in range(0, len(replies), 2)]


def _text(reply: Any) -> str:
    return reply.decode() if isinstance(reply, bytes) else str(reply)


def lengths(items: list[BigKey], nodes: dict[str, Node]) -> None:
    """Fill in `length` (elements, or bytes for strings) for each item, per node."""
    for address, node in nodes.items():
        mine = [item for item in items if item.node == address]
        if not mine:
            continue
        commands = [
            encode(LENGTH_COMMANDS.get(item.type, "STRLEN").encode(), item.key) for item in mine
        ]
        replies = run_raw(node, commands)
        for item, reply in zip(mine, replies, strict=True):
            item.length = reply if isinstance(reply, int) else None


def measure(
    scan: Scan,
    *,
    top: int,
    samples: int = 5,
    on_batch: Callable[[int], None] = lambda done: None,
) -> Report:
    """Scan, keep the `top` largest keys and the totals; Ctrl-C returns what was found so
    far with `interrupted` set and the cursor to resume from."""
    heap: TopN[BigKey] = TopN(top)
    totals = TypeTotals()
    interrupted = False
    try:
        for node, keys in scan.batches():
            scan.limiter.take(2 * len(keys))
            for key, (kind, size) in zip(keys, _measure_batch(node, keys, samples), strict=True):
                if not isinstance(size, int) or kind == "none":
                    continue  # deleted since the SCAN
                totals.add(kind, size)
                if size > heap.floor():
                    heap.offer(size, BigKey(key, kind, size, node.address))
            on_batch(scan.done_estimate())
    except KeyboardInterrupt:
        interrupted = True
    found = heap.items()
    if not interrupted:
        lengths(found, {n.address: n for n in scan.nodes})
    return Report(
        top=found,
        totals=totals,
        scanned=totals.all.keys,
        interrupted=interrupted,
        cursor=scan.resume_token() if interrupted else None,
    )
