"""Long scans: SCAN over every node, rate-limited, resumable after Ctrl-C.

`Scan.batches()` yields one SCAN reply at a time (`node`, its keys). A node's cursor moves
past a batch only when the consumer asks for the next one, so `Scan.resume_token()` taken
after an interruption names the first batch not fully handled: resuming with it redoes at
most one batch, never skips one.

The resume token is the SCAN cursor on one server (`1234`), and on a Cluster one cursor per
master still to scan, `HOST:PORT=CURSOR,...` (a master left out is finished).

Progress: SCAN walks the hash table in reverse-binary order of bucket indexes, so the
bit-reversed cursor over 64 bits, divided by 2**64, is the share of the table already
walked, whatever the table's size (`scanned_share`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from seawall.ops._connect import Node, OpsError, guard
from seawall.ops._rate import Limiter

__all__ = [
    "TYPES",
    "Scan",
    "format_cursor",
    "parse_cursor",
    "scanned_share",
]

TYPES = ("string", "list", "set", "zset", "hash", "stream")


def scanned_share(cursor: int) -> float:
    """The share of a node's keyspace a SCAN has walked when it returns `cursor` (0 < c)."""
    reversed_bits = int(f"{cursor & (2**64 - 1):064b}"[::-1], 2)
    return reversed_bits / 2**64


def parse_cursor(text: str, addresses: Sequence[str], cluster: bool) -> dict[str, int | None]:
    """Positions (address -> cursor, None = finished) from a resume token."""
    text = text.strip()
    if not cluster:
        if not text.isdigit():
            raise OpsError(f"--cursor {text!r} is not a SCAN cursor (a number such as 1234)")
        return {addresses[0]: int(text)}
    positions: dict[str, int | None] = dict.fromkeys(addresses)
    for part in filter(None, text.split(",")):
        address, sep, value = part.rpartition("=")
        if not sep or not value.isdigit():
            raise OpsError(
                f"--cursor {text!r}: on a Cluster give HOST:PORT=CURSOR for each master "
                "(as printed when the scan was interrupted)"
            )
        if address not in positions:
            raise OpsError(
                f"--cursor names {address}, which is not a master of this Cluster now "
                f"(masters: {', '.join(addresses)}); start again without --cursor"
            )
        positions[address] = int(value)
    return positions


def format_cursor(positions: dict[str, int | None], cluster: bool) -> str | None:
    """The resume token for `positions`; None when every node is finished."""
    left = {a: c for a, c in positions.items() if c is not None}
    if not left:
        return None
    if not cluster:
        return str(next(iter(left.values())))
    return ",".join(f"{address}={cursor}" for address, cursor in left.items())


@dataclass
class Progress:
    total: int = 0  # keys on the scanned nodes (DBSIZE when the scan started)
    returned: int = 0  # keys SCAN returned (after --pattern/--type)

    def done_estimate(self, shares: Sequence[float], sizes: Sequence[int]) -> int:
        walked = int(sum(share * size for share, size in zip(shares, sizes, strict=True)))
        return min(self.total, max(walked, self.returned))


class Scan:
    def __init__(
        self,
        nodes: Sequence[Node],
        *,
        cluster: bool,
        pattern: str | None = None,
        type_: str | None = None,
        count: int = 1000,
        limiter: Limiter | None = None,
        cursor: str | None = None,
    ) -> None:
        if type_ is not None and type_ not in TYPES:
            raise OpsError(f"--type {type_!r} is not a Redis type: one of {', '.join(TYPES)}")
        self.nodes = list(nodes)
        self.cluster = cluster
        self.pattern = pattern
        self.type = type_
        self.count = count
        self.limiter = limiter if limiter is not None else Limiter(None)
        addresses = [n.address for n in self.nodes]
        self.positions: dict[str, int | None] = (
            dict.fromkeys(addresses, 0)
            if cursor is None
            else parse_cursor(cursor, addresses, cluster)
        )
        self.sizes = {n.address: int(guard(n.client.dbsize, n.address)) for n in self.nodes}
        self.progress = Progress(total=sum(self.sizes.values()))
        self._shares = {
            a: (1.0 if c is None else scanned_share(c)) for a, c in self.positions.items()
        }
        self.batches_done = 0

    def done_estimate(self) -> int:
        addresses = list(self.sizes)
        return self.progress.done_estimate(
            [self._shares[a] for a in addresses], [self.sizes[a] for a in addresses]
        )

    def batches(self) -> Iterator[tuple[Node, list[bytes]]]:
        for node in self.nodes:
            cursor = self.positions[node.address]
            while cursor is not None:
                self.limiter.take(1)
                reply: Any = guard(
                    node.client.scan,
                    node.address,
                    cursor,
                    match=self.pattern,
                    count=self.count,
                    _type=self.type,
                )
                following, keys = int(reply[0]), [bytes(k) for k in reply[1]]
                self.progress.returned += len(keys)
                if keys:
                    yield node, keys
                cursor = None if following == 0 else following
                self.positions[node.address] = cursor
                self._shares[node.address] = 1.0 if cursor is None else scanned_share(cursor)
                self.batches_done += 1

    def resume_token(self) -> str | None:
        return format_cursor(self.positions, self.cluster)

    def describe(self) -> str:
        """What was asked for, for 'nothing matched' messages."""
        parts = []
        if self.pattern:
            parts.append(f"pattern {self.pattern!r}")
        if self.type:
            parts.append(f"type {self.type}")
        return " and ".join(parts) or "no filter"
