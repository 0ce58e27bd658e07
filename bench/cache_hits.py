"""Cache hits per second: seawall's L1 against cachetools, its L2 against a bare redis-py GET.

L1 (in-process): seawall.Cache.get_or_load on keys its L1 holds, against what a user would
otherwise write, a cachetools TTLCache behind its `cached` decorator with a lock (seawall's
L1 is thread-safe too); a bare `TTLCache.get` is shown as well. L2 (Redis): seawall with its
L1 off (l1_size=0), so every hit is one plain MGET (the value and its hit marker, no
script), against redis-py `GET` + json.loads of the same value on the same server; sync and
asyncio. "its script alone" is the fetch script (EVALSHA) made with bare redis-py: what an
L2 hit cost before it became a plain read, and what a miss or stale read still sends. "its
MGET alone" is that plain read sent bare, its payload parsed with json.loads: the floor of
an L2 hit in seawall's format; "GET of its value alone" the floor of a format read with
one GET (no hit marker).
One process, one caller, 100 warm keys read in turn, in batches; contenders take turns
batch by batch, order reversed every turn; a figure is the median over passes, a ratio
the median of same-pass ratios.

    PYTHONPATH=src .venv/bin/python bench/cache_hits.py [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import cachetools
import redis
import redis.asyncio
from _harness import (
    Column,
    Goal,
    Table,
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
import seawall.cache._sync.base
from seawall.cache._codec import cache_keys

KEYS = 100
VALUE = {"id": 42, "name": "a cached row", "tags": ["x", "y"], "score": 0.5}

COLUMNS = [
    Column("hits_per_s", "hits/s", ",.0f"),
    Column("us_per_hit", "us/hit", ".1f"),
    Column("ratio", "vs its baseline", ".2f"),
]
HEADLINE = "hits_per_s"
FIRST = "contender"

# contender -> the contender its ratio is taken against (same pass)
BASELINES = {
    "L1 cachetools TTLCache.get": "L1 cachetools @cached+lock",
    "L1 seawall.Cache": "L1 cachetools @cached+lock",
    "L1 seawall.aio.Cache": "L1 cachetools @cached+lock",
    "L2 seawall.Cache (l1_size=0)": "L2 redis-py GET+json.loads",
    "L2 its script alone (EVALSHA)": "L2 redis-py GET+json.loads",
    "L2 its MGET alone (+json.loads)": "L2 redis-py GET+json.loads",
    "L2 GET of its value alone (+json.loads)": "L2 redis-py GET+json.loads",
    "L2 seawall.aio.Cache (l1_size=0)": "L2 redis.asyncio GET+json.loads",
}

GOALS = [
    Goal("L1 seawall.Cache >= 1.0 x cachetools", "L1 seawall.Cache", "ratio", ">=", 1.0),
    Goal("L1 seawall.aio.Cache >= 1.0 x cachetools", "L1 seawall.aio.Cache", "ratio", ">=", 1.0),
    Goal(
        "L2 seawall.Cache >= 0.9 x redis-py GET+json.loads",
        "L2 seawall.Cache (l1_size=0)",
        "ratio",
        ">=",
        0.9,
    ),
    Goal(
        "L2 seawall.aio.Cache >= 0.9 x redis.asyncio GET+json.loads",
        "L2 seawall.aio.Cache (l1_size=0)",
        "ratio",
        ">=",
        0.9,
    ),
]


def _never() -> Any:
    raise AssertionError("the benchmark's keys are all warm: the loader must not run")


def _timed(read: Callable[[str], Any], keys: list[str], repeat: int) -> Callable[[], float]:
    """A batch: each key read `repeat` times; returns the seconds it took."""

    def batch() -> float:
        start = time.perf_counter()
        for _ in range(repeat):
            for key in keys:
                read(key)
        return time.perf_counter() - start

    return batch


def _atimed(
    runner: asyncio.Runner, read: Callable[[str], Any], keys: list[str], repeat: int
) -> Callable[[], float]:
    async def timed() -> float:
        start = time.perf_counter()  # inside the loop: the runner's own cost is not counted
        for _ in range(repeat):
            for key in keys:
                await read(key)
        return time.perf_counter() - start

    return lambda: runner.run(timed())


def contenders(url: str, runner: asyncio.Runner, name: str) -> dict[str, Callable[[float], float]]:
    """Each contender, warmed, as a batch of reads returning its seconds."""
    keys = [f"{name}:{i}" for i in range(KEYS)]
    client = redis.Redis.from_url(url)
    aclient = runner.run(_make_async_client(url))
    payload = json.dumps(VALUE)
    for key in keys:
        client.set(key, payload)

    ttl_cache: cachetools.TTLCache[str, Any] = cachetools.TTLCache(maxsize=10_000, ttl=300)

    @cachetools.cached(ttl_cache, lock=threading.Lock())
    def cachetools_read(key: str) -> Any:
        return dict(VALUE)

    for key in keys:
        cachetools_read(key)

    l1 = seawall.Cache(client, f"{name}:l1", ttl=3000)  # L1 entries live min(5 s, ttl/10)
    # hot_keys=0: no key is held in memory either (hot keys would be, with L1 off).
    l2 = seawall.Cache(client, f"{name}:l2", ttl=3000, l1_size=0, hot_keys=0)
    al1 = seawall.aio.Cache(aclient, f"{name}:al1", ttl=3000)
    al2 = seawall.aio.Cache(aclient, f"{name}:al2", ttl=3000, l1_size=0, hot_keys=0)
    for key in keys:
        for cache in (l1, l2):
            cache.get_or_load(key, lambda: dict(VALUE))
        for acache in (al1, al2):
            runner.run(acache.get_or_load(key, lambda: dict(VALUE)))

    def l1_read(key: str) -> Any:
        return l1.get_or_load(key, _never)

    def l2_read(key: str) -> Any:
        return l2.get_or_load(key, _never)

    def al1_read(key: str) -> Any:
        return al1.get_or_load(key, _never)

    def al2_read(key: str) -> Any:
        return al2.get_or_load(key, _never)

    fetch = seawall.cache._sync.base._FETCH
    script_keys = {key: cache_keys(l2.namespace, key).all for key in keys}

    def bare_script(key: str) -> Any:
        names = script_keys[key]
        reply = client.evalsha(fetch.sha, len(names), *names, "t" * 32, 10_000, "", "")
        return json.loads(reply[1])  # type: ignore[index]

    read_keys = {key: cache_keys(l2.namespace, key).read for key in keys}

    def bare_mget(key: str) -> Any:
        # The floor of a plain hit in this format: its one command, sent bare, and the
        # payload after the entry's header parsed with the baseline's json.loads.
        stored, _ = client.execute_command("MGET", *read_keys[key])
        return json.loads(stored.split(b":", 2)[2])

    value_keys = {key: names[0] for key, names in read_keys.items()}

    def bare_get(key: str) -> Any:
        # The floor of a one-GET format (freshness kept in the value itself): what dropping
        # the hit marker from the read could gain at most.
        return json.loads(client.execute_command("GET", value_keys[key]).split(b":", 2)[2])

    def plain(key: str) -> Any:
        return json.loads(client.get(key))  # type: ignore[arg-type]

    async def aplain(key: str) -> Any:
        return json.loads(await aclient.get(key))

    one, many = 1, 20  # reads of each key per batch: an L1 batch must outlast the timer
    return {
        "L1 cachetools @cached+lock": _timed(cachetools_read, keys, many),
        "L1 cachetools TTLCache.get": _timed(ttl_cache.get, keys, many),
        "L1 seawall.Cache": _timed(l1_read, keys, many),
        "L1 seawall.aio.Cache": _atimed(runner, al1_read, keys, many),
        "L2 redis-py GET+json.loads": _timed(plain, keys, one),
        "L2 seawall.Cache (l1_size=0)": _timed(l2_read, keys, one),
        "L2 its script alone (EVALSHA)": _timed(bare_script, keys, one),
        "L2 its MGET alone (+json.loads)": _timed(bare_mget, keys, one),
        "L2 GET of its value alone (+json.loads)": _timed(bare_get, keys, one),
        "L2 redis.asyncio GET+json.loads": _atimed(runner, aplain, keys, one),
        "L2 seawall.aio.Cache (l1_size=0)": _atimed(runner, al2_read, keys, one),
    }


async def _make_async_client(url: str) -> Any:
    return redis.asyncio.Redis.from_url(url)


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=0.5, help="per contender per pass")


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], _arguments)
    passes = 2 if args.quick else args.passes
    seconds = 0.1 if args.quick else args.seconds
    table: Table = {}
    with seawall.server() as url, asyncio.Runner() as runner:
        admin = redis.Redis.from_url(url)
        print(f"cache_hits: {machine_note()}; {server_note(admin)}")
        admin.close()
        print(f"{KEYS} warm keys, {passes} passes of {seconds} s per contender\n")
        runs = contenders(url, runner, unique_name("hits"))
        reads = {name: KEYS * (20 if name.startswith("L1") else 1) for name in runs}
        samples: dict[str, list[float]] = {name: [] for name in runs}
        ratios: dict[str, list[float]] = {name: [] for name in BASELINES}
        for number in range(passes):
            # Batches of all contenders in turn (order reversed every other time), so load
            # changes on the shared machine hit all of them alike.
            spent = dict.fromkeys(runs, 0.0)
            done = dict.fromkeys(runs, 0)
            until = time.perf_counter() + seconds * len(runs)
            turn = 0
            while time.perf_counter() < until:
                order = list(runs) if turn % 2 == 0 else list(reversed(runs))
                for name in order:
                    spent[name] += runs[name]()
                    done[name] += reads[name]
                turn += 1
            figures = {name: done[name] / spent[name] for name in runs}
            for name, value in figures.items():
                samples[name].append(value)
            for name, base in BASELINES.items():
                ratios[name].append(figures[name] / figures[base])
            print(f"  pass {number + 1}: " + ", ".join(f"{n} {v:,.0f}" for n, v in figures.items()))
        for name, values in samples.items():
            rate = median(values)
            table[name] = {"hits_per_s": rate, "us_per_hit": 1e6 / rate}
            if name in ratios:
                table[name]["ratio"] = median(ratios[name])
    print()
    print(format_table(COLUMNS, table, first=FIRST))
    print("\nratio: against cachetools @cached+lock (L1 rows) or the same world's bare GET (L2)")
    print("\nGoals:\n" + format_goals(GOALS, table))
    write_json(args.json, "cache_hits", table, {"passes": passes, "seconds": seconds})


if __name__ == "__main__":
    main()
