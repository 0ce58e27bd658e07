"""Hot keys in seawall.Cache: how fast they are found, what serving them saves, what it costs.

Three figures, one run (a Zipf(1.1) read load over 100,000 keys, as popularity on a real
site falls off):
- recall: after 2 s of reads by one process, the share of the true 20 hottest keys among
  the 20 the cache reports (`Cache.hot_keys(20)`); goal >= 0.95;
- Redis requests saved: a Cache with its L1 off (`l1_size=0`) serving only its hot keys
  from memory, against the same Cache with `hot_keys=0`; goal >= 50 % fewer requests;
- overhead: L1 hits per second with the sketch on (`hot_keys=256`) and off, in turns;
  goal <= 5 % of a hit's time.

    PYTHONPATH=src .venv/bin/python bench/hotkeys.py [--quick] [--json PATH]

--quick: 100,000 Zipf reads drawn (not 300,000) and 3 timed turns (not 7).
"""

from __future__ import annotations

import itertools
import random
import statistics
import time

import redis
from _harness import Column, Goal, Table, format_goals, format_table, parse_args, write_json

import seawall
from seawall.launcher import server

KEYS = 100_000
SKEW = 1.1

CONTENDER = "seawall.Cache hot keys"
HEADLINE = "recall"
FIRST = "contender"
COLUMNS = [
    Column("recall", "top-20 recall after 2 s", ".2f"),
    Column("reads", "reads in those 2 s", ",.0f"),
    Column("saved", "Redis requests saved, L1 off", ".0%"),
    Column("requests_on", "requests, hot keys on", ",.0f"),
    Column("requests_off", "requests, hot keys off", ",.0f"),
    Column("overhead", "L1 hit time, sketch on / off", ".3f"),
    Column("hit_ns", "L1 hit ns, sketch off", ",.0f"),
]
GOALS = [
    Goal("recall of the top 20 >= 0.95", CONTENDER, "recall", ">=", 0.95),
    Goal(">= 50 % fewer Redis requests with L1 off", CONTENDER, "saved", ">=", 0.5),
    Goal("sketch overhead <= 5 % of an L1 hit", CONTENDER, "overhead", "<=", 1.05),
]


def zipf_keys(count: int, seed: int = 11) -> list[int]:
    rng = random.Random(seed)
    weights = [1 / rank**SKEW for rank in range(1, KEYS + 1)]
    return rng.choices(range(1, KEYS + 1), weights, k=count)


def recall(r: redis.Redis, reads: list[int]) -> tuple[float, int]:
    cache = seawall.Cache(r, "bench:hot:recall", ttl=600)
    listener = cache._listener()
    assert listener is not None and listener.wait_listening(10)
    cache.warm({key: key for key in set(reads[:50_000])})
    done, started = 0, time.monotonic()
    for key in itertools.cycle(reads):
        cache.get_or_load(key, lambda: None)
        done += 1
        if done % 1000 == 0 and time.monotonic() - started >= 2.0:
            break
    found = {int(key.rsplit(":", 1)[-1]) for key, _ in cache.hot_keys(20)}
    return len(found & set(range(1, 21))) / 20, done


def requests_saved(r: redis.Redis, reads: list[int]) -> tuple[int, int]:
    counts = []
    for hot_keys in (256, 0):
        cache = seawall.Cache(
            r, f"bench:hot:saved:{hot_keys}", ttl=600, l1_size=0, hot_keys=hot_keys
        )
        listener = cache._listener()
        if listener is not None:
            assert listener.wait_listening(10)
        cache.warm({key: key for key in set(reads)})
        before = sum(int(v["calls"]) for v in r.info("commandstats").values())
        for key in reads:
            cache.get_or_load(key, lambda: None)
        after = sum(int(v["calls"]) for v in r.info("commandstats").values())
        counts.append(after - before - 1)  # the INFO call itself
    return counts[0], counts[1]


def overhead(r: redis.Redis, turns: int) -> tuple[float, float]:
    caches = {
        hot_keys: seawall.Cache(
            r, f"bench:hot:cost:{hot_keys}", ttl=600, l1_ttl=600, hot_keys=hot_keys
        )
        for hot_keys in (256, 0)
    }
    for cache in caches.values():
        listener = cache._listener()
        assert listener is not None and listener.wait_listening(10)
        for i in range(1000):
            cache.get_or_load(i, lambda: "v")
    ratios, times = [], {256: [], 0: []}  # type: ignore[var-annotated]
    for turn in range(turns):
        order = (256, 0) if turn % 2 else (0, 256)
        took = {}
        for hot_keys in order:
            cache = caches[hot_keys]
            started = time.perf_counter()
            for i in range(200_000):
                cache.get_or_load(i % 1000, str)
            took[hot_keys] = (time.perf_counter() - started) / 200_000
            times[hot_keys].append(took[hot_keys])
        ratios.append(took[256] / took[0])
    return statistics.median(ratios), statistics.median(times[0])


def main() -> None:
    args = parse_args(__doc__.split("\n")[0], lambda parser: None)
    reads = zipf_keys(100_000 if args.quick else 300_000)
    counted = 100_000  # fewer reads leave the hot set's warm-up too large a share
    with server() as url:
        r = redis.Redis.from_url(url)
        found, done = recall(r, reads)
        print(f"recall of the top 20 after 2 s ({done:,} reads): {found:.2f}  (goal >= 0.95)")
        with_hot, without = requests_saved(r, reads[:counted])
        saved = 1 - with_hot / without
        print(
            f"Redis requests for {counted:,} reads with L1 off: {with_hot:,} with hot keys, "
            f"{without:,} without: {saved:.0%} fewer  (goal >= 50 %)"
        )
        ratio, hit = overhead(r, 3 if args.quick else 7)
        print(
            f"L1 hit with the sketch / without: {ratio:.3f} (median of turns; a hit takes "
            f"{hit * 1e9:,.0f} ns without)  (goal <= 1.05)"
        )
    table: Table = {
        CONTENDER: {
            "recall": found,
            "reads": float(done),
            "saved": saved,
            "requests_on": float(with_hot),
            "requests_off": float(without),
            "overhead": ratio,
            "hit_ns": hit * 1e9,
        }
    }
    print()
    print(format_table(COLUMNS, table, first=FIRST))
    print("\nGoals:\n" + format_goals(GOALS, table))
    write_json(args.json, "hotkeys", table, {"reads": len(reads), "counted": counted})


if __name__ == "__main__":
    main()
