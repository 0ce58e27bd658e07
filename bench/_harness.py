"""Shared plumbing for the benchmarks: arguments, statistics, tables, request counting.

Each benchmark is a script (`python bench/lock_uncontended.py`) that starts its own server
with `seawall.server()`, prints a table and, with `--json PATH`, writes its figures so that
`bench/run_all.py` can take medians over several runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import statistics
import sys
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
import redis.asyncio.connection
import redis.connection

# contender -> metric -> value; the one shape every benchmark reports.
Table = dict[str, dict[str, float]]


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    fmt: str  # format spec applied to the value, e.g. ",.0f"


@dataclass(frozen=True)
class Goal:
    """A target from the issue: `contender`'s `metric` compared with `bound`."""

    text: str
    contender: str
    metric: str
    op: str  # ">=" or "<=" or "=="
    bound: float

    def check(self, table: Table) -> bool | None:
        """True/False when the figure exists, None when it was not measured."""
        value = table.get(self.contender, {}).get(self.metric)
        if value is None or math.isnan(value):
            return None
        if self.op == ">=":
            return value >= self.bound
        if self.op == "<=":
            return value <= self.bound
        return value == self.bound


def parse_args(
    description: str, extra: Callable[[argparse.ArgumentParser], None]
) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="a short run, for smoke tests")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write figures here")
    extra(parser)
    return parser.parse_args()


def unique_name(kind: str) -> str:
    """A key-safe name nobody else uses, so runs never see each other's keys."""
    return f"bench:{kind}:{uuid.uuid4().hex[:10]}"


# --- statistics ---------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) of `values`, by linear interpolation; NaN when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def median(values: Sequence[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return statistics.median(finite) if finite else math.nan


def interleaved_rounds(
    names: Sequence[str], run_round: Callable[[str], tuple[float, float]], passes: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Run each contender once per pass, forward on even passes and backward on odd ones,
    so none always runs right after the same neighbour; print each pass.

    `run_round(name)` returns (operations per second, CPU microseconds per operation).
    Returns those two figures per contender, one entry per pass.
    """
    rounds: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    for index in range(passes):
        for name in names if index % 2 == 0 else names[::-1]:
            ops, cpu_us = run_round(name)
            rounds[name].append(ops)
            cpu[name].append(cpu_us)
        print(
            f"  pass {index + 1}/{passes}: "
            + ", ".join(f"{name} {rounds[name][-1]:,.0f}" for name in names)
        )
    return rounds, cpu


def round_figures(
    samples: Sequence[float], baseline: Sequence[float], cpu_us: Sequence[float]
) -> dict[str, float]:
    """The usual row of a rounds benchmark: ops/s (median, min, max), us per op, CPU us
    per op, and the ratio to the baseline. Each pass runs a contender and its baseline
    close together, so the ratio is the median of the per-pass ratios: spared most of the
    machine's drift."""
    paired = zip(samples, baseline, strict=True)
    return {
        "ops": median(samples),
        "ops_min": min(samples),
        "ops_max": max(samples),
        "us": 1e6 / median(samples),
        "cpu_us": median(cpu_us),
        "ratio": median([mine / theirs for mine, theirs in paired]),
    }


def median_table(tables: Sequence[Table]) -> Table:
    """The median of every (contender, metric) over several runs, in first-seen order."""
    merged: Table = {}
    for contender in dict.fromkeys(c for t in tables for c in t):
        metrics = dict.fromkeys(m for t in tables for m in t.get(contender, {}))
        merged[contender] = {
            m: median([t[contender][m] for t in tables if m in t.get(contender, {})])
            for m in metrics
        }
    return merged


# --- output -------------------------------------------------------------------------------


def _cell(value: float | None, fmt: str) -> str:
    if value is None or math.isnan(value):
        return "-"
    return format(value, fmt)


def format_table(
    columns: Sequence[Column], table: Table, *, first: str = "contender", markdown: bool = False
) -> str:
    header = [first, *(c.title for c in columns)]
    rows = [
        [name, *(_cell(metrics.get(c.key), c.fmt) for c in columns)]
        for name, metrics in table.items()
    ]
    if markdown:
        lines = [header, ["---"] * len(header), *rows]
        return "\n".join("| " + " | ".join(line) + " |" for line in lines)
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        # Names left-aligned, figures right-aligned.
        return "  ".join(
            cell.ljust(width) if i == 0 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(cells, widths, strict=True))
        )

    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


def format_goals(goals: Sequence[Goal], table: Table) -> str:
    lines = []
    for goal in goals:
        verdict = goal.check(table)
        mark = {True: "MET", False: "MISSED", None: "not measured"}[verdict]
        value = table.get(goal.contender, {}).get(goal.metric)
        shown = "-" if value is None else f"{value:.4g}"
        lines.append(f"  [{mark:>6}] {goal.text} (measured {shown})")
    return "\n".join(lines)


def machine_note() -> str:
    return (
        f"{platform.python_implementation()} {platform.python_version()}, redis-py "
        f"{redis.__version__}, {os.cpu_count()} CPUs, {platform.machine()}, "
        f"{platform.system()} {platform.release()}"
    )


def server_note(client: redis.Redis) -> str:
    info = client.info("server")
    name = "valkey" if "valkey_version" in info else "redis"
    version = info.get("valkey_version") or info.get("redis_version")
    return f"{name} {version} on port {info.get('tcp_port')}"


def write_json(path: Path | None, benchmark: str, table: Table, notes: Mapping[str, Any]) -> None:
    if path is None:
        return
    document = {"benchmark": benchmark, "table": table, "notes": dict(notes), "argv": sys.argv}
    path.write_text(json.dumps(document, indent=1, allow_nan=True))


# --- floors -------------------------------------------------------------------------------


def one_async_get_per_key(client: redis.asyncio.Redis) -> Callable[[str], Awaitable[Any]]:
    """The least an asyncio cache can do for the tasks of one process that read a key it
    does not hold: one plain GET per key, whose reply every task asking for it shares."""
    flights: dict[str, asyncio.Future[Any]] = {}

    async def read(key: str) -> Any:
        flight = flights.get(key)
        if flight is None:
            flight = flights[key] = asyncio.get_running_loop().create_future()
            flight.set_result(await client.get(key))
        return await flight

    return read


# --- counting requests --------------------------------------------------------------------


class RequestCounter:
    """Counts requests written to Redis by redis-py, sync and asyncio, in this process.

    Every command or pipeline a redis-py connection writes goes through its
    `send_packed_command` once, and the caller then waits for the reply: one count is one
    round trip. Counting on the client side tells requests from the commands a Lua script
    runs inside the server, which the server's own counters lump together.
    """

    def __init__(self) -> None:
        self._mutex = threading.Lock()  # pottery sends from its executor's threads
        self.requests = 0

    def tick(self) -> None:
        with self._mutex:
            self.requests += 1


@contextmanager
def counting_requests() -> Iterator[RequestCounter]:
    """Patch redis-py's connection classes to count requests while the block runs."""
    counter = RequestCounter()
    sync_cls = redis.connection.AbstractConnection
    async_cls = redis.asyncio.connection.AbstractConnection
    sync_send: Callable[..., Any] = sync_cls.send_packed_command
    async_send = async_cls.send_packed_command

    def send(self: Any, *args: Any, **kwargs: Any) -> Any:
        counter.tick()
        return sync_send(self, *args, **kwargs)

    async def send_async(self: Any, *args: Any, **kwargs: Any) -> Any:
        counter.tick()
        return await async_send(self, *args, **kwargs)

    sync_cls.send_packed_command = send  # type: ignore[method-assign]
    async_cls.send_packed_command = send_async  # type: ignore[method-assign]
    try:
        yield counter
    finally:
        sync_cls.send_packed_command = sync_send  # type: ignore[method-assign]
        async_cls.send_packed_command = async_send  # type: ignore[method-assign]


def server_commands(client: redis.Redis) -> int:
    """Commands the server has run, Lua-internal ones included (INFO stats)."""
    return int(client.info("stats")["total_commands_processed"])


def server_cpu(client: redis.Redis) -> float:
    """CPU seconds the server has used, system and user, all its threads (INFO cpu)."""
    info = client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def command_calls(client: redis.Redis) -> dict[str, int]:
    """Calls per command name (INFO commandstats), Lua-internal ones included."""
    stats = client.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}
