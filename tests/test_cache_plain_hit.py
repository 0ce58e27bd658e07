"""A fresh L2 hit is one plain MGET (value and hit marker), no script; all else keeps its
script: the last `lead` of the fresh time, stale values, misses, deletes."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from conftest import Target

import seawall
import seawall.aio


def calls(r: Any) -> dict[str, int]:
    stats = r.info("commandstats")
    names = ("mget", "evalsha", "eval")
    return {name: int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in names}


def test_fresh_hits_send_no_script(standalone: Target, world: str) -> None:
    r = standalone.sync()
    cache = seawall.Cache(r, "plain", l1_size=0, hot_keys=0)  # every read reaches Redis
    cache.set("k", {"n": 1})
    cache.set("gone", None)  # an absent entry is a plain hit too
    r.config_resetstat()
    if world == "sync":
        answers = [cache.get_or_load("k", _never) for _ in range(20)]
        answers += [cache.get_or_load("gone", _never), cache.get("k")]
        stats = cache.stats()
    else:

        async def main() -> tuple[list[Any], Any]:
            client = standalone.aio()
            try:
                acache = seawall.aio.Cache(client, "plain", l1_size=0, hot_keys=0)
                found = [await acache.get_or_load("k", _never) for _ in range(20)]
                found += [await acache.get_or_load("gone", _never), await acache.get("k")]
                return found, acache.stats()
            finally:
                await client.aclose()

        answers, stats = asyncio.run(main())
    assert answers == [{"n": 1}] * 20 + [None, {"n": 1}]
    assert calls(r) == {"mget": 22, "evalsha": 0, "eval": 0}
    assert (stats.l2_hits, stats.absent_hits, stats.loads) == (21, 1, 0)


def test_last_lead_of_the_fresh_time_goes_through_the_script(target: Target) -> None:
    # The L1 may keep a plain hit for the marker's lead (0.4 s here): the marker expires that
    # long before the value turns stale, and the script answers in between.
    r = target.sync()
    cache = seawall.Cache(r, "lead", ttl=1.0, stale_ttl=30, jitter=0, l1_ttl=0.4)
    cache.set("k", "v1")
    hit = "seawall:cache:{lead:k}:hit"
    assert r.get(hit) == b"400" and 0 < r.pttl(hit) <= 600
    value = "seawall:cache:{lead:k}:value"
    assert r.get(value) == b'30000:0:"v1"'  # stale window, load time, payload
    assert 30_000 < r.pttl(value) <= 31_000
    time.sleep(0.7)  # past the marker, still fresh
    assert r.mget([value, hit]) == [b'30000:0:"v1"', None]
    cache.l1.clear()
    assert cache.get_or_load("k", _never) == "v1"  # fresh, from the script: no load
    assert cache.stats().l2_hits == 1 and cache.stats().loads == 0
    time.sleep(0.45)  # the L1 copy lived at most the 0.3 s of freshness left; now stale
    assert cache.get_or_load("k", lambda: "v2") == "v1"  # served stale, refreshed behind
    for _ in range(100):
        if cache.get("k") == "v2":
            break
        time.sleep(0.02)
    assert cache.get("k") == "v2" and cache.stats().refreshes == 1


def test_delete_removes_every_key_of_an_entry(target: Target) -> None:
    r = target.sync()
    cache = seawall.Cache(r, "del", l1_size=0)
    cache.set("k", "v")
    assert len(target.keys()) == 2  # the value and its hit marker (no lease, no waiters)
    cache.delete("k")
    assert target.keys() == []
    assert cache.get_or_load("k", lambda: "v2") == "v2"


def test_plain_hits_on_every_client_kind(target: Target, world: str) -> None:
    # The plain read is a bare MGET command: each client kind (one server or Cluster, sync
    # or asyncio) must route it to the entry's node and hand back both keys. Many keys, so
    # they land on every node of a cluster.
    r = target.sync()
    writer = seawall.Cache(r, "kinds", l1_size=0, hot_keys=0)
    keys = [f"k{i}" for i in range(30)]
    for key in keys:
        writer.set(key, {"key": key})
    writer.set("gone", None)
    _reset_stats(r, target.cluster)
    if world == "sync":
        cache = seawall.Cache(target.sync(), "kinds", l1_size=0, hot_keys=0)
        answers = [cache.get_or_load(key, _never) for key in [*keys, "gone"]]
        stats = cache.stats()
    else:

        async def main() -> tuple[list[Any], Any]:
            client = target.aio()
            try:
                acache = seawall.aio.Cache(client, "kinds", l1_size=0, hot_keys=0)
                found = [await acache.get_or_load(key, _never) for key in [*keys, "gone"]]
                return found, acache.stats()
            finally:
                await client.aclose()

        answers, stats = asyncio.run(main())
    assert answers == [{"key": key} for key in keys] + [None]
    assert (stats.l2_hits, stats.absent_hits, stats.loads, stats.misses) == (30, 1, 0, 0)
    assert _all_calls(r, target.cluster) == {"mget": 31, "evalsha": 0, "eval": 0}


def test_warm_get_or_load_many_is_plain_reads_only(target: Target, world: str) -> None:
    # 30 keys held fresh and one absent: one MGET on one server, no script; a key that
    # is missing still goes to the fetch script and is loaded.
    r = target.sync()
    writer = seawall.Cache(r, "many", l1_size=0, hot_keys=0)
    keys = [f"k{i}" for i in range(30)]
    writer.set_many({key: {"key": key} for key in keys})
    writer.set("gone", None)
    _reset_stats(r, target.cluster)

    def never_many(missing: list[str]) -> dict[str, Any]:
        raise AssertionError(f"fresh entries must not load: {missing}")

    if world == "sync":
        cache = seawall.Cache(target.sync(), "many", l1_size=0, hot_keys=0)
        answers = cache.get_or_load_many([*keys, "gone"], never_many)
        warm_calls = _all_calls(r, target.cluster)
        mixed = cache.get_or_load_many(["k0", "new"], lambda missing: {"new": missing})
        stats = cache.stats()
    else:

        async def main() -> tuple[dict[str, Any], dict[str, int], dict[str, Any], Any]:
            client = target.aio()
            try:
                acache = seawall.aio.Cache(client, "many", l1_size=0, hot_keys=0)
                found = await acache.get_or_load_many([*keys, "gone"], never_many)
                counted = _all_calls(r, target.cluster)
                both = await acache.get_or_load_many(
                    ["k0", "new"], lambda missing: {"new": missing}
                )
                return found, counted, both, acache.stats()
            finally:
                await client.aclose()

        answers, warm_calls, mixed, stats = asyncio.run(main())
    assert answers == {**{key: {"key": key} for key in keys}, "gone": None}
    assert warm_calls["evalsha"] == warm_calls["eval"] == 0, warm_calls
    # Cluster: one MGET per hash slot (each entry's keys share one), pipelined per node.
    assert warm_calls["mget"] == (31 if target.cluster else 1), warm_calls
    assert mixed == {"k0": {"key": "k0"}, "new": ["new"]}
    assert (stats.l2_hits, stats.absent_hits, stats.loads) == (31, 1, 1)


def test_get_many_keeps_fresh_entries_in_the_l1(target: Target, world: str) -> None:
    # The first get_many reads Redis and keeps what it read fresh; the second is answered
    # from memory. A stale entry is still returned (get_many serves stale values), and is
    # not kept.
    r = target.sync()
    # Written with an L1 like the reader's: the hit marker's lead vouches for that long.
    writer = seawall.Cache(r, "gm", ttl=60, hot_keys=0)
    keys = [f"k{i}" for i in range(10)]
    writer.set_many({key: {"key": key} for key in keys})
    seawall.Cache(r, "gm", ttl=0.2, stale_ttl=60, jitter=0, l1_size=0).set("old", "o")
    time.sleep(0.4)  # "old" is stale now, still stored
    wanted = {**{key: {"key": key} for key in keys}, "old": "o"}
    if world == "sync":
        cache = seawall.Cache(target.sync(), "gm", ttl=60, hot_keys=0)
        listener = cache._listener()
        assert listener is not None and listener.wait_listening(10)
        first = cache.get_many([*keys, "old"])
        _reset_stats(r, target.cluster)
        second = cache.get_many(keys)
        stats = cache.stats()
    else:

        async def main() -> tuple[dict[str, Any], dict[str, Any], Any]:
            client = target.aio()
            try:
                acache = seawall.aio.Cache(client, "gm", ttl=60, hot_keys=0)
                listener = acache._listener()
                assert listener is not None and await listener.wait_listening(10)
                found = await acache.get_many([*keys, "old"])
                _reset_stats(r, target.cluster)
                again = await acache.get_many(keys)
                return found, again, acache.stats()
            finally:
                await client.aclose()

        first, second, stats = asyncio.run(main())
    assert first == wanted
    assert second == {key: {"key": key} for key in keys}
    assert _all_calls(r, target.cluster)["mget"] == 0  # the second call read no Redis
    assert (stats.l1_hits, stats.l2_hits) == (10, 11)


def _reset_stats(r: Any, cluster: bool) -> None:
    if cluster:
        r.config_resetstat(target_nodes=r.ALL_NODES)
    else:
        r.config_resetstat()


def _all_calls(r: Any, cluster: bool) -> dict[str, int]:
    """Calls of the read commands on every node (primaries and replicas)."""
    if not cluster:
        return calls(r)
    totals = dict.fromkeys(("mget", "evalsha", "eval"), 0)
    for stats in r.info("commandstats", target_nodes=r.ALL_NODES).values():
        for name in totals:
            totals[name] += int(stats.get(f"cmdstat_{name}", {}).get("calls", 0))
    return totals


def _never() -> Any:
    raise AssertionError("a fresh hit must not load")


def test_after_a_miss_the_next_read_goes_straight_to_the_script(target: Target, world: str) -> None:
    # A plain read that finds nothing fresh costs a round trip more than the script alone:
    # in a run of misses only the first pays it. A fresh value found by the script turns
    # plain reads back on: of 10 hits, the first is a script call, the 9 others plain.
    r = target.sync()
    keys = [f"m{i}" for i in range(10)]
    if world == "sync":
        cache = seawall.Cache(target.sync(), "runs", l1_size=0, hot_keys=0)
        _reset_stats(r, target.cluster)
        loaded = [cache.get_or_load(key, lambda key=key: key.upper()) for key in keys]
        misses = _all_calls(r, target.cluster)
        _reset_stats(r, target.cluster)
        hits = [cache.get_or_load(key, _never) for key in keys]
        stats = cache.stats()
    else:

        async def main() -> tuple[list[Any], dict[str, int], list[Any], Any]:
            client = target.aio()
            try:
                acache = seawall.aio.Cache(client, "runs", l1_size=0, hot_keys=0)
                _reset_stats(r, target.cluster)
                found = [await acache.get_or_load(key, key.upper) for key in keys]
                sent = _all_calls(r, target.cluster)
                _reset_stats(r, target.cluster)
                again = [await acache.get_or_load(key, _never) for key in keys]
                return found, sent, again, acache.stats()
            finally:
                await client.aclose()

        loaded, misses, hits, stats = asyncio.run(main())
    assert loaded == hits == [key.upper() for key in keys]
    # 10 fetches and 10 write-backs; one plain read, the first.
    assert _reads(misses) == (1, 20), misses
    assert _reads(_all_calls(r, target.cluster)) == (9, 1)
    assert (stats.loads, stats.l2_hits) == (10, 10)


def _reads(calls: dict[str, int]) -> tuple[int, int]:
    """(plain reads, script calls): every script call is an EVALSHA first (one a node
    answers NOSCRIPT is sent again as EVAL, which is not counted)."""
    return calls["mget"], calls["evalsha"]
