"""`seawall hotkeys` (LFU counters, seawall.Cache reports) and `seawall delete --pattern`
on real servers, including the step-by-step path where UNLINK is unavailable."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import redis

import seawall
from seawall.cache._hotkeys import HotKeys
from tests.ops._run import one_line_error
from tests.ops._run import seawall as run_seawall


def _url(server: Any) -> str:
    return f"redis://127.0.0.1:{server.port}/0"


def test_hotkeys_from_lfu_counters(
    seawall_server_factory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    server = seawall_server_factory(
        # Log factor 0: the counter counts every access (capped at 255), so the test's
        # 300 and 60 reads give distinct counters instead of near-ties on a log scale.
        extra_args=[
            "--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lfu", "--lfu-log-factor", "0",
        ]
    )  # fmt: skip
    r = server.client()
    for i in range(200):
        r.set(f"cold:{i}", i)
    r.set("hot:1", 1)
    r.set("hot:2", 2)
    for _ in range(300):
        r.get("hot:1")
    for _ in range(60):
        r.get("hot:2")
    run = run_seawall(capsys, "hotkeys", _url(server), "--top", "2", "--json")
    assert run.code == 0, run.err
    found = run.json()
    assert [e["key"] for e in found] == ["hot:1", "hot:2"]
    assert {e["method"] for e in found} == {"lfu"} and found[0]["freq"] > found[1]["freq"]
    table = run_seawall(capsys, "hotkeys", _url(server), "--top", "1")
    assert "method lfu" in table.out and "hot:1" in table.out
    r.close()


def test_hotkeys_from_what_caches_published(
    seawall_redis: redis.Redis, seawall_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    caches = [seawall.Cache(seawall_redis, "menu", ttl=60) for _ in range(2)]
    for cache in caches:
        cache._hot = HotKeys(256, sample_every=1, half_life=60)
        cache.set("pizza", 1)
        cache.set("salad", 2)
        for _ in range(40):
            cache.get("pizza")
        for _ in range(5):
            cache.get("salad")
        cache._publish_hot_keys()  # what each process does once per half-life
    deadline = time.monotonic() + 5
    while len(seawall_redis.keys("seawall:hotkeys:*")) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    run = run_seawall(capsys, "hotkeys", seawall_url, "--json")
    assert run.code == 0, run.err
    found = run.json()
    assert found[0]["key"] == caches[0]._key("pizza") and found[0]["processes"] == 2
    assert found[0]["method"] == "published" and found[0]["reads_per_sec"] > 0
    assert found[1]["key"] == caches[0]._key("salad")


def test_hotkeys_without_a_method_says_what_to_do(
    seawall_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    error = one_line_error(run_seawall(capsys, "hotkeys", seawall_url), "hotkeys")
    assert "allkeys-lfu" in error


def _fill(r: Any, prefix: str, count: int) -> None:
    pipe = r.pipeline(transaction=False)
    for i in range(count):
        pipe.set(f"{prefix}{{{i % 50}}}:{i}", i)  # tags spread keys over Cluster slots
    pipe.execute()


@pytest.mark.parametrize("where", ["standalone", "cluster"])
def test_delete_by_pattern_confirmation_and_dry_run(
    where: str, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    if where == "standalone":
        r = request.getfixturevalue("seawall_redis")
        url = _url(request.getfixturevalue("seawall_server"))
        count = lambda pattern: len(r.keys(pattern))  # noqa: E731, SW001
    else:
        r = request.getfixturevalue("seawall_cluster_client")
        url = request.getfixturevalue("seawall_cluster").url
        count = lambda pattern: len(  # noqa: E731
            r.keys(pattern, target_nodes=r.PRIMARIES)  # noqa: SW001
        )
    _fill(r, "job:", 2000)
    _fill(r, "keep:", 100)
    refused = run_seawall(capsys, "delete", url, "--pattern", "job:*")
    assert "pass --yes" in one_line_error(refused, "delete")
    dry = run_seawall(capsys, "delete", url, "--pattern", "job:*", "--dry-run", "--json")
    assert dry.json()["matched"] == 2000 and dry.json()["deleted"] == 0
    assert count("job:*") == 2000
    run = run_seawall(capsys, "delete", url, "--pattern", "job:*", "--yes")
    assert run.code == 0, run.err
    assert "deleted 2,000 keys matching 'job:*'" in run.out
    assert count("job:*") == 0 and count("keep:*") == 100
    again = run_seawall(capsys, "delete", url, "--pattern", "job:*", "--yes")
    assert "no key matches pattern 'job:*'" in one_line_error(again, "delete")


@pytest.mark.serial
def test_delete_empties_big_collections_step_by_step_without_unlink(
    seawall_server_factory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """With UNLINK renamed away and lazy freeing off, DEL of a 200,000-field hash would
    stall the server; the delete empties it in small steps and PING stays fast."""
    server = seawall_server_factory(extra_args=["--rename-command", "UNLINK", ""])
    r = server.client()
    for name in ("hash", "set", "zset", "list"):
        pipe = r.pipeline(transaction=False)
        for start in range(0, 100_000, 10_000):
            chunk = range(start, start + 10_000)
            if name == "hash":
                pipe.hset("big:hash", mapping={f"f{i}": i for i in chunk})
            elif name == "set":
                pipe.sadd("big:set", *chunk)
            elif name == "zset":
                pipe.zadd("big:zset", {f"m{i}": i for i in chunk})
            else:
                pipe.rpush("big:list", *chunk)
        pipe.execute()
    _fill(r, "big:small:", 5000)
    worst: list[float] = []
    stop = threading.Event()

    def ping() -> None:
        pinger = server.client()
        pinger.ping()  # connected first: its set-up (59 ms once, loaded) is not the server's
        while not stop.is_set():
            started = time.perf_counter()
            pinger.ping()
            worst.append(time.perf_counter() - started)
        pinger.close()

    thread = threading.Thread(target=ping)
    thread.start()
    try:
        run = run_seawall(capsys, "delete", _url(server), "--pattern", "big:*", "--yes", "--json")
    finally:
        stop.set()
        thread.join()
    assert run.code == 0, run.err
    report = run.json()
    assert report["deleted"] == 5004 and r.dbsize() == 0
    assert sorted(report["emptied_incrementally"]) == [
        "big:hash",
        "big:list",
        "big:set",
        "big:zset",
    ]
    assert report["free"] == {f"127.0.0.1:{server.port}": "incremental"}
    assert len(worst) > 10 and max(worst) < 0.05, max(worst)
    r.close()
