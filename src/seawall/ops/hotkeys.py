"""`seawall hotkeys`: the most-read keys, by the best method the server allows.

- `lfu`: the eviction policy is an LFU one, so every key carries a logarithmic access
  counter; `OBJECT FREQ` over a scan reads it (pipelined like `bigkeys`). The figure is
  that counter (0-255: 255 is very hot).
- `hotkeys`: the server has the HOTKEYS command (Redis 8.6+), which samples the CPU time
  spent per key while it tracks; tracking runs `seconds` on every master. The figure is
  microseconds of CPU.
- `published`: otherwise, what `seawall.Cache` processes published (each its top 20 per
  cache, `seawall:hotkeys:{namespace}:<process>` sorted sets, reads/s as scores), summed
  over processes. The figure is reads per second.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis

from seawall.ops._connect import Node, OpsError, Target, command, guard, info_text
from seawall.ops._info import parse_info
from seawall.ops._output import text_key
from seawall.ops._pipeline import present_commands, run_raw
from seawall.ops._scan import Scan
from seawall.ops._sizes import TopN

__all__ = ["FIGURES", "METHODS", "HotKey", "choose_method", "parse_hotkeys_get"]

METHODS = ("lfu", "hotkeys", "published")
# The JSON field of each method's figure (every entry also has `frequency`).
FIGURES = {"lfu": "freq", "hotkeys": "cpu_us", "published": "reads_per_sec"}
PUBLISHED_PATTERN = "seawall:hotkeys:*"


@dataclass
class HotKey:
    key: str
    frequency: float
    method: str
    node: str | None = None
    sources: int = 1  # published: how many processes reported the key

    def as_json(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "key": self.key,
            "frequency": self.frequency,
            FIGURES[self.method]: self.frequency,
            "method": self.method,
        }
        if self.node is not None:
            entry["node"] = self.node
        if self.method == "published":
            entry["processes"] = self.sources
        return entry


def choose_method(policy: str, has_hotkeys_command: bool, published: bool) -> str | None:
    """LFU counters when the policy keeps them, else HOTKEYS, else published reports."""
    if "lfu" in policy:
        return "lfu"
    if has_hotkeys_command:
        return "hotkeys"
    if published:
        return "published"
    return None


def parse_hotkeys_get(reply: Any) -> list[tuple[bytes, int]]:
    """The `by-cpu-time-us` pairs of a HOTKEYS GET reply (a flat name/value list, or a
    map under RESP3), hottest first."""
    if reply is None:
        return []
    fields = reply if isinstance(reply, dict) else dict(zip(reply[::2], reply[1::2], strict=True))
    named = {text_key(k): v for k, v in fields.items()}
    pairs = named.get("by-cpu-time-us") or []
    if isinstance(pairs, dict):
        pairs = [x for kv in pairs.items() for x in kv]
    out = [(bytes(pairs[i]), int(pairs[i + 1])) for i in range(0, len(pairs) - 1, 2)]
    return sorted(out, key=lambda kv: -kv[1])


def probe(target: Target) -> tuple[str, bool, bool]:
    """(eviction policy, HOTKEYS command present, anything published) of the target."""
    node = target.masters[0]
    info = parse_info(guard(info_text, node.address, node.client, "memory"))
    policy = str(info.get("maxmemory_policy", ""))
    has_command = present_commands(node, ["HOTKEYS"])["HOTKEYS"]
    published = any(_has_reports(m) for m in target.masters)
    return policy, has_command, published


def _has_reports(node: Node) -> bool:
    def first() -> bool:
        found = node.client.scan_iter(match=PUBLISHED_PATTERN, count=1000, _type="zset")
        return next(iter(found), None) is not None

    return guard(first, node.address)


def by_lfu(scan: Scan, top: int, on_batch: Callable[[int], None]) -> tuple[list[HotKey], bool]:
    heap: TopN[HotKey] = TopN(top)
    interrupted = False
    try:
        for node, keys in scan.batches():
            scan.limiter.take(len(keys))
            commands = [
                b"*3\r\n$6\r\nOBJECT\r\n$4\r\nFREQ\r\n$%d\r\n%s\r\n" % (len(k), k) for k in keys
            ]
            for key, freq in zip(keys, run_raw(node, commands), strict=True):
                if isinstance(freq, int) and freq > heap.floor():
                    heap.offer(freq, HotKey(text_key(key), freq, "lfu", node.address))
            on_batch(scan.done_estimate())
    except KeyboardInterrupt:
        interrupted = True
    return heap.items(), interrupted


def by_command(nodes: list[Node], top: int, seconds: float) -> tuple[list[HotKey], bool]:
    for node in nodes:
        guard(
            command, node.address, node.client,
            "HOTKEYS", "START", "METRICS", 1, "CPU", "COUNT", top,
            "DURATION", max(1, round(seconds)),
        )  # fmt: skip
    interrupted = False
    try:
        time.sleep(seconds)
    except KeyboardInterrupt:
        interrupted = True
    heap: TopN[HotKey] = TopN(top)
    for node in nodes:
        reply = guard(command, node.address, node.client, "HOTKEYS", "GET")
        for key, cpu_us in parse_hotkeys_get(reply):
            heap.offer(cpu_us, HotKey(text_key(key), cpu_us, "hotkeys", node.address))
        for step in ("STOP", "RESET"):
            # STOP fails when DURATION already stopped it: nothing to undo then.
            with contextlib.suppress(redis.ResponseError):
                command(node.client, "HOTKEYS", step)
    return heap.items(), interrupted


def by_published(target: Target, top: int) -> list[HotKey]:
    rates: dict[str, float] = {}
    sources: dict[str, int] = {}
    for node in target.masters:
        client = node.client
        for report in client.scan_iter(match=PUBLISHED_PATTERN, count=1000, _type="zset"):
            entries: Any = guard(client.zrange, node.address, report, 0, -1, withscores=True)
            for member, rate in entries:
                key = text_key(member)
                rates[key] = rates.get(key, 0.0) + float(rate)
                sources[key] = sources.get(key, 0) + 1
    heap: TopN[HotKey] = TopN(top)
    for key, rate in rates.items():
        heap.offer(rate, HotKey(key, round(rate, 2), "published", sources=sources[key]))
    return heap.items()


def no_method_error(policy: str) -> OpsError:
    return OpsError(
        f"no way to find hot keys on this server: its eviction policy is {policy or 'unknown'} "
        "(not LFU), it has no HOTKEYS command (Redis 8.6+), and no seawall.Cache published "
        "its hot keys; set `maxmemory-policy allkeys-lfu` (CONFIG SET) or read through "
        "seawall.Cache"
    )
