"""Bloom filter throughput and round trips: seawall.BloomFilter against pottery.BloomFilter.

pottery is the Redis-backed Bloom filter a Python user would otherwise pick. Each pass
builds one fresh filter per contender (capacity N at 1 %), adds N ids in one call, checks
N other ids (absent: the false positives are counted) in one call, then makes single
membership checks for a fixed time. Contenders take turns, order reversed every pass;
a figure is the median over passes, a ratio the median of same-pass ratios.

    PYTHONPATH=src .venv/bin/python bench/bloom.py [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pottery
import redis
import redis.asyncio
from _harness import (
    Column,
    Goal,
    Table,
    counting_requests,
    format_goals,
    format_table,
    machine_note,
    median,
    parse_args,
    server_note,
    unique_name,
    write_json,
)

import seawall
import seawall.aio

ERROR_RATE = 0.01
BASELINE = "pottery.BloomFilter"


@dataclass
class Ops:
    """One contender's filter, as plain calls (asyncio ones run to completion)."""

    add_many: Callable[[list[str]], Any]
    contains_many: Callable[[list[str]], list[bool]]
    singles: Callable[[list[str], float], int]  # single checks for some seconds; how many


def _loop(contains: Callable[[str], Any], items: list[str], seconds: float) -> int:
    done = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for item in items:
            contains(item)
        done += len(items)
    return done


async def _aloop(bloom: Any, items: list[str], seconds: float) -> int:
    done = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for item in items:
            await bloom.might_contain(item)
        done += len(items)
    return done


def _seawall(client: redis.Redis, runner: asyncio.Runner, name: str, n: int) -> Ops:
    bloom = seawall.BloomFilter(client, name, n, ERROR_RATE)
    bloom.create()
    return Ops(bloom.add_many, bloom.contains_many, lambda i, s: _loop(bloom.might_contain, i, s))


def _seawall_aio(aclient: Any, runner: asyncio.Runner, name: str, n: int) -> Ops:
    bloom = seawall.aio.BloomFilter(aclient, name, n, ERROR_RATE)
    runner.run(bloom.create())
    return Ops(
        lambda items: runner.run(bloom.add_many(items)),
        lambda items: runner.run(bloom.contains_many(items)),
        lambda items, seconds: runner.run(_aloop(bloom, items, seconds)),
    )


def _pottery(client: redis.Redis, runner: asyncio.Runner, name: str, n: int) -> Ops:
    # As its documentation shows: update() to add many, contains_many() to check many.
    bloom = pottery.BloomFilter(num_elements=n, false_positives=ERROR_RATE, redis=client, key=name)
    return Ops(
        bloom.update,
        lambda items: list(bloom.contains_many(*items)),
        lambda items, seconds: _loop(bloom.__contains__, items, seconds),
    )


CONTENDERS: dict[str, Callable[..., Ops]] = {
    "seawall.BloomFilter": _seawall,
    "seawall.aio.BloomFilter": _seawall_aio,
    BASELINE: _pottery,
}

COLUMNS = [
    Column("add_ops", "add items/s", ",.0f"),
    Column("add_ratio", "x pottery", ".1f"),
    Column("check_ops", "check items/s", ",.0f"),
    Column("check_ratio", "x pottery", ".1f"),
    Column("single_ops", "single checks/s", ",.0f"),
    Column("single_ratio", "x pottery", ".2f"),
    Column("add_requests", "round trips/add_many", ".0f"),
    Column("check_requests", "round trips/contains_many", ".0f"),
    Column("fp_rate", "FP rate %", ".3f"),
]
HEADLINE = "add_ops"
FIRST = "contender"

GOALS = [
    Goal("seawall.BloomFilter FP rate <= 1.1 %", "seawall.BloomFilter", "fp_rate", "<=", 1.1),
    Goal("seawall.BloomFilter adds >= pottery", "seawall.BloomFilter", "add_ratio", ">=", 1.0),
    Goal("seawall.BloomFilter checks >= pottery", "seawall.BloomFilter", "check_ratio", ">=", 1.0),
]


def one_pass(ops: Ops, n: int, tag: str, single_seconds: float) -> dict[str, float]:
    present = [f"user:{tag}:{i}" for i in range(n)]
    absent = [f"ghost:{tag}:{i}" for i in range(n)]
    with counting_requests() as adds:
        start = time.perf_counter()
        ops.add_many(present)
        add_s = time.perf_counter() - start
    with counting_requests() as checks:
        start = time.perf_counter()
        found = ops.contains_many(absent)
        check_s = time.perf_counter() - start
    start = time.perf_counter()
    done = ops.singles(present[:50], single_seconds)
    single_s = time.perf_counter() - start
    return {
        "add_ops": n / add_s,
        "check_ops": n / check_s,
        "single_ops": done / single_s,
        "add_requests": adds.requests,
        "check_requests": checks.requests,
        "fp_rate": 100 * sum(found) / n,
    }


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], _arguments)
    n = 5_000 if args.quick else args.items
    passes = 3 if args.quick else args.passes
    single_seconds = 0.3 if args.quick else 1.0
    warnings.simplefilter("ignore")  # pottery warns that bulk calls are "inefficient"
    with seawall.server() as url, asyncio.Runner() as runner:
        client = redis.Redis.from_url(url)
        aclient = redis.asyncio.Redis.from_url(url)
        run_id = unique_name("bloom")
        print(f"bloom: {machine_note()}; {server_note(client)}")
        print(f"{passes} passes x {len(CONTENDERS)} contenders, N = {n:,} at {ERROR_RATE:.0%}\n")
        samples: dict[str, list[dict[str, float]]] = {name: [] for name in CONTENDERS}
        names = list(CONTENDERS)
        for index in range(passes):
            for name in names if index % 2 == 0 else names[::-1]:
                key = f"{run_id}:{index}:{name}"
                target = aclient if "aio" in name else client
                ops = CONTENDERS[name](target, runner, key, n)
                samples[name].append(one_pass(ops, n, f"{index}", single_seconds))
            print(
                f"  pass {index + 1}/{passes}: "
                + ", ".join(f"{m} {samples[m][-1]['add_ops']:,.0f} adds/s" for m in names)
            )
        for key in client.scan_iter(match=f"*{run_id}*", count=1000):
            client.delete(key)
        runner.run(aclient.aclose())
        client.close()
    table: Table = {}
    for name in names:
        runs = samples[name]
        row = {metric: median([run[metric] for run in runs]) for metric in runs[0]}
        for metric, ratio in (
            ("add_ops", "add_ratio"),
            ("check_ops", "check_ratio"),
            ("single_ops", "single_ratio"),
        ):
            pairs = zip(runs, samples[BASELINE], strict=True)
            row[ratio] = median([mine[metric] / theirs[metric] for mine, theirs in pairs])
        table[name] = row
    print()
    print(format_table(COLUMNS, table, first=FIRST))
    print(
        "\nadd/check items/s: one add_many/update and one contains_many call of N items.\n"
        "single checks/s: one might_contain/`in` per call. round trips: counted in redis-py.\n"
        "FP rate: share of N absent ids reported present, after N ids were added."
    )
    print("\nGoals:\n" + format_goals(GOALS, table))
    write_json(args.json, "bloom", table, {"passes": passes, "items": n})


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--items", type=int, default=20_000, help="N, ids added and checked")
    parser.add_argument("--passes", type=int, default=3, help="passes over the contenders")


if __name__ == "__main__":
    main()
