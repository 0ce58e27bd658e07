"""The ZooKeeper lock's decisions, without I/O: paths, node names and which node a
waiter watches.

The lock is ZooKeeper's classic recipe. Every contender creates an ephemeral sequential
node `/seawall/lock/{name}/n-{token}-{sequence}` (ephemeral: it dies with the client's
session); the lowest sequence holds the lock. A waiter watches only the node just ahead
of it (the highest sequence below its own) and looks again when that node is deleted, so a
release wakes one waiter, never the herd. A hold's fence is its node's czxid, the zxid of
the transaction that created it: zxids only grow for the life of the ensemble, even when
the parent node is deleted and its sequence numbers start again from 0.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from urllib.parse import quote

ROOT = "/seawall/lock"
NODE_PREFIX = "n-"

# A waiter whose watch saw nothing for this long looks again on its own: a bound on how
# long a lost watch could leave it asleep, not a polling period.
WAIT_SLICE = 5.0

# ZooKeeper's sequence suffix: ten digits.
_SEQUENCE_DIGITS = 10


def parent_of(name: str) -> str:
    """The node under which contenders for lock `name` queue (a '/' in the name is
    escaped, so every name is one node)."""
    return f"{ROOT}/{quote(name, safe='')}"


def new_token() -> str:
    return secrets.token_hex(8)


def node_prefix(token: str) -> str:
    """The name a contender asks for; ZooKeeper appends the sequence number."""
    return f"{NODE_PREFIX}{token}-"


def sequence_of(child: str) -> int | None:
    """The sequence number of one of our nodes, None for a node that is not one."""
    digits = child[-_SEQUENCE_DIGITS:]
    if not child.startswith(NODE_PREFIX) or len(child) <= _SEQUENCE_DIGITS or not digits.isdigit():
        return None
    return int(digits)


def predecessor(children: Iterable[str], mine: str) -> str | None:
    """The node the owner of `mine` watches: the one with the highest sequence below its
    own; None when none is ahead (it holds the lock)."""
    own = sequence_of(mine)
    if own is None:
        raise ValueError(f"{mine!r} is not a seawall lock node")
    ahead = [(seq, child) for child in children if (seq := sequence_of(child)) is not None]
    earlier = [(seq, child) for seq, child in ahead if seq < own]
    return max(earlier)[1] if earlier else None


def check_hosts(hosts: object) -> str:
    if not isinstance(hosts, str) or not hosts:
        raise TypeError(
            "seawall.zookeeper.Lock needs a ZooKeeper connection string such as "
            f"'127.0.0.1:2181' (or 'h1:2181,h2:2181,h3:2181'), got {hosts!r}"
        )
    return hosts
