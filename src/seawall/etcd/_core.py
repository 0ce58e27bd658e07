"""The etcd lock's decisions, without I/O: key layout, lease arithmetic, the requests'
bodies for etcd's JSON gateway, and which key a waiter watches.

The lock is the queue recipe etcd's own `concurrency.Mutex` uses. Every contender puts a
key `seawall/lock/{name}/{lease id}` attached to its lease; the key with the lowest create
revision holds the lock. A waiter watches only the key just ahead of it (the highest
create revision below its own) and looks again when that key is deleted, so a release
wakes one waiter, never the herd. A hold's fence is its key's create revision: etcd's
revision only grows, through restarts and leader changes, so fences strictly increase.
"""

from __future__ import annotations

import base64
import math
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from seawall.errors import LockError

PREFIX = "seawall/lock/"

# etcd leases are whole seconds, and a single-member cluster (default timings) raises any
# ttl below its minimum (about 2 s) to that minimum; the granted ttl is what counts.
MIN_TTL = 1.0

# A waiter whose watch saw nothing for this long (at most) checks its own lease and looks
# again: a bound on how long a broken watch could leave it asleep, not a polling period.
WAIT_SLICE = 5.0


# etcd's gRPC status code for a lease (or key) it does not know.
NOT_FOUND = 5


class EtcdError(LockError):
    """etcd refused a request; `code` is its gRPC status code."""

    def __init__(self, message: str, *, code: int = 0, lock_name: str | None = None) -> None:
        super().__init__(message, lock_name=lock_name)
        self.code = code


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode("ascii")


def unb64(text: str) -> str:
    return base64.b64decode(text).decode()


def prefix_of(name: str) -> str:
    return f"{PREFIX}{name}/"


def prefix_end(prefix: str) -> str:
    """The end of the key range [prefix, end) that holds every key under `prefix`."""
    raw = prefix.encode()
    return base64.b64encode(raw[:-1] + bytes([raw[-1] + 1])).decode("ascii")


def lease_seconds(ttl: float) -> int:
    """The whole seconds of lease that cover `ttl` (never shorter than asked)."""
    return max(1, math.ceil(ttl))


def new_lease_id() -> int:
    """A lease id chosen here, so a grant whose reply is lost can still be revoked."""
    return secrets.randbelow(2**62 - 1) + 1


def token_of(lease: int) -> str:
    return f"{lease:016x}"


def lease_of(token: str) -> int:
    return int(token, 16)


def wait_slice(ttl: float, remaining: float | None) -> float:
    """How long a waiter's watch may stay silent before it renews its own lease and looks
    again: a third of the lease (so its queued key never expires), at most WAIT_SLICE."""
    slice_ = min(ttl / 3, WAIT_SLICE)
    return slice_ if remaining is None else max(min(slice_, remaining), 0.0)


def renew_at(lease_until: float, ttl: float) -> float:
    """When to renew a lease that lasts (locally) until `lease_until`: with two thirds
    of its ttl left, as seawall's Redis locks renew."""
    return lease_until - ttl * 2 / 3


def spare_usable(lease_until: float, ttl: float, now: float) -> bool:
    """Whether a lease kept from a release may carry a new hold: at least half its ttl
    left, so the renewer (due at two thirds) has time for retries before it lapses."""
    return lease_until - now >= ttl / 2


def release_body(key: str, fence: int) -> dict[str, Any]:
    """A txn that deletes `key` only while it is the hold with create revision `fence`
    (a key whose lease ran out is gone, and the txn then fails: not owned)."""
    return {
        "compare": [
            {"key": b64(key), "target": "CREATE", "result": "EQUAL", "create_revision": str(fence)}
        ],
        "success": [{"request_delete_range": {"key": b64(key)}}],
    }


def enqueue_body(prefix: str, key: str, lease: int) -> dict[str, Any]:
    """A txn that puts `key` (unless already there: a retried request) and lists the two
    newest keys under `prefix`: the new key and the one just ahead of it."""
    end = prefix_end(prefix)
    newest_two = {
        "key": b64(prefix),
        "range_end": end,
        "sort_order": "DESCEND",
        "sort_target": "CREATE",
        "limit": 2,
        "keys_only": True,
    }
    return {
        "compare": [
            {"key": b64(key), "target": "CREATE", "result": "EQUAL", "create_revision": "0"}
        ],
        "success": [
            {"request_put": {"key": b64(key), "value": "", "lease": str(lease)}},
            {"request_range": newest_two},
        ],
        "failure": [{"request_range": {"key": b64(key)}}],
    }


def recheck_body(prefix: str, key: str, revision: int) -> dict[str, Any]:
    """A txn that, while `key` still exists with create revision `revision`, lists the
    newest key ahead of it (none: the lock is ours) and the oldest key (the holder)."""
    return {
        "compare": [
            {
                "key": b64(key),
                "target": "CREATE",
                "result": "EQUAL",
                "create_revision": str(revision),
            }
        ],
        "success": [
            {
                "request_range": {
                    "key": b64(prefix),
                    "range_end": prefix_end(prefix),
                    "sort_order": "DESCEND",
                    "sort_target": "CREATE",
                    "limit": 1,
                    "keys_only": True,
                    "max_create_revision": str(revision - 1),
                }
            },
            {
                "request_range": {
                    "key": b64(prefix),
                    "range_end": prefix_end(prefix),
                    "sort_order": "ASCEND",
                    "sort_target": "CREATE",
                    "limit": 1,
                    "keys_only": True,
                }
            },
        ],
    }


def kvs_of(response: Mapping[str, Any]) -> list[tuple[str, int]]:
    """(key, create revision) of each key in a range response."""
    return [(unb64(kv["key"]), int(kv.get("create_revision", 0))) for kv in response.get("kvs", [])]


def predecessor(listing: Sequence[tuple[str, int]], revision: int) -> str | None:
    """The key a waiter with create revision `revision` watches: the newest of `listing`
    created before it; None when no key is ahead (the waiter holds the lock)."""
    ahead = [(rev, key) for key, rev in listing if 0 < rev < revision]
    return max(ahead)[1] if ahead else None


def enqueued(reply: Mapping[str, Any], key: str) -> tuple[int, str | None, bool]:
    """From the enqueue txn's reply: our key's create revision, the key to watch (None:
    the lock is ours; "": unknown, look with a recheck, as after a retried request whose
    key was there already), and whether that key is the only one ahead of ours."""
    responses = reply.get("responses", [])
    if reply.get("succeeded"):
        revision = int(reply["header"]["revision"])
        newest = responses[1].get("response_range", {})
        ahead = predecessor(kvs_of(newest), revision)
        # Nothing is created after our key within the txn: every other key is ahead.
        return revision, ahead, ahead is not None and int(newest.get("count", 0)) == 2
    listing = kvs_of(responses[0].get("response_range", {}))
    return dict(listing)[key], "", False


def rechecked(reply: Mapping[str, Any]) -> tuple[bool, str | None, bool]:
    """From the recheck txn's reply: (our key still exists, the key to watch or None,
    whether that key is the only one ahead: it is also the oldest)."""
    if not reply.get("succeeded"):
        return False, None, False
    newest_ahead = kvs_of(reply["responses"][0].get("response_range", {}))
    oldest = kvs_of(reply["responses"][1].get("response_range", {}))
    if not newest_ahead:
        return True, None, False
    ahead = newest_ahead[0][0]
    return True, ahead, bool(oldest) and oldest[0][0] == ahead


# What one watch message means to a waiter (None: nothing yet, read on).
SILENT = 0  # the watch saw nothing within its time
DELETED = 1  # the watched key was deleted
LOOK = 2  # look again: the watch ended, was cancelled or compacted, or may have missed it


def watch_outcome(
    message: Mapping[str, Any], start_revision: int = 0, look_early: bool = False
) -> int | None:
    """What one watch message tells a waiter watching a key from `start_revision`.

    With `look_early`, the watch's creation when the store has moved past
    `start_revision - 1` meanwhile is LOOK: etcd replays what a watch missed before it
    existed only at its next catch-up pass (every 100 ms), so a release that came in that
    gap is found sooner by looking again at once.
    """
    result = message.get("result", message)
    if any(event.get("type") == "DELETE" for event in result.get("events", [])):
        return DELETED
    if result.get("canceled") or int(result.get("compact_revision", 0) or 0):
        return LOOK
    if look_early and result.get("created"):
        moved = int(result.get("header", {}).get("revision", 0)) >= start_revision
        return LOOK if moved else None
    return None
