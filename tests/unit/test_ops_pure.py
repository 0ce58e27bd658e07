"""The pure cores of the operations commands: INFO parsing, the rate limit, bounded top-N
and percentiles, resume cursors, CRC16 slots, hot-key and delete decisions."""

from __future__ import annotations

import random

import pytest
from redis.crc import key_slot as redis_py_slot

from seawall.ops._connect import OpsError, parse_cluster_nodes
from seawall.ops._info import parse_info
from seawall.ops._rate import Limiter, TokenBucket
from seawall.ops._scan import format_cursor, parse_cursor, scanned_share
from seawall.ops._sizes import Histogram, TopN
from seawall.ops.delete import choose_free
from seawall.ops.hotkeys import choose_method, parse_hotkeys_get
from seawall.ops.slots import hash_tag, key_slot
from seawall.ops.stats import Sample, summarize

INFO = """# Server\r
redis_version:7.0.15\r
# Stats\r
keyspace_hits:30\r
keyspace_misses:10\r
total_commands_processed:1000\r
instantaneous_ops_per_sec:5\r
mem_fragmentation_ratio:1.25\r
# Replication\r
role:master\r
connected_slaves:1\r
master_repl_offset:5000\r
slave0:ip=127.0.0.1,port=6380,state=online,offset=4200,lag=1\r
# Commandstats\r
cmdstat_get:calls=50,usec=100,usec_per_call=2.00,rejected_calls=0,failed_calls=0\r
cmdstat_hgetall:calls=2,usec=900,usec_per_call=450.00\r
# Keyspace\r
db0:keys=10,expires=2,avg_ttl=0\r
"""


def test_info_text_becomes_typed_fields() -> None:
    info = parse_info(INFO.encode())
    assert info["redis_version"] == "7.0.15"
    assert info["keyspace_hits"] == 30 and info["mem_fragmentation_ratio"] == 1.25
    assert info["db0"] == {"keys": 10, "expires": 2, "avg_ttl": 0}
    assert info["slave0"]["offset"] == 4200 and info["slave0"]["ip"] == "127.0.0.1"


def test_stats_hit_rate_top_commands_lag_and_ops_between_samples() -> None:
    before = Sample("a:1", "master", parse_info(INFO), at=10.0)
    later = dict(before.info, total_commands_processed=1500)
    figures = summarize([Sample("a:1", "master", later, at=12.0)], [before])
    assert figures["hit_rate"] == 0.75
    assert figures["ops_per_sec"] == 250.0  # 500 commands in 2 s, not the instantaneous 5
    assert figures["top_commands_by_calls"][0]["command"] == "get"
    assert figures["top_commands_by_time"][0]["command"] == "hgetall"
    assert figures["replication"][0]["lag_bytes"] == 800
    assert figures["keys"] == 10
    assert summarize([Sample("a:1", "master", {}, 0.0)])["hit_rate"] is None


def test_token_bucket_keeps_the_rate_and_never_bursts() -> None:
    bucket = TokenBucket(1000, now=0.0)  # holds 100 ops
    assert bucket.delay(100, now=0.0) == 0.0
    assert bucket.delay(500, now=0.0) == pytest.approx(0.5)
    # An hour idle refills the bucket to 0.1 s worth, not an hour's worth.
    assert bucket.delay(200, now=3600.0) == pytest.approx(0.1)
    with pytest.raises(ValueError, match="max-ops"):
        TokenBucket(0, now=0.0)


def test_limiter_sleeps_what_the_bucket_says() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    limiter = Limiter(10_000, clock=lambda: now[0], sleep=sleep)
    for _ in range(100):
        limiter.take(1000)  # 100,000 ops at 10,000/s: 10 s
    assert sum(slept) == pytest.approx(10.0 - 0.1, rel=0.01)
    assert Limiter(None).take(10**9) is None and limiter.ops == 100_000


def test_top_n_keeps_the_heaviest_first_in_bounded_memory() -> None:
    rng = random.Random(3)
    values = [rng.randrange(10**6) for _ in range(10_000)]
    top: TopN[int] = TopN(5)
    for v in values:
        top.offer(v, v)
        assert len(top) <= 5
    assert top.items() == sorted(values, reverse=True)[:5]
    with pytest.raises(ValueError, match="--top"):
        TopN(0)


def test_histogram_percentiles_within_a_bucket() -> None:
    h = Histogram()
    for v in range(1, 10_001):
        h.add(v)
    for q in (50, 90, 99):
        exact = 10_000 * q / 100
        assert abs(h.percentile(q) - exact) / exact < 0.1
    assert h.percentile(100) == 10_000 and len(h.counts) < 120


def test_resume_cursors_single_and_cluster() -> None:
    assert parse_cursor("1234", ["h:1"], cluster=False) == {"h:1": 1234}
    positions = parse_cursor("h:1=5,h:3=0", ["h:1", "h:2", "h:3"], cluster=True)
    assert positions == {"h:1": 5, "h:2": None, "h:3": 0}
    assert format_cursor(positions, cluster=True) == "h:1=5,h:3=0"
    assert format_cursor({"h:1": None}, cluster=False) is None
    for bad, cluster in (("abc", False), ("h:9=1", True), ("h:1", True)):
        with pytest.raises(OpsError, match="--cursor"):
            parse_cursor(bad, ["h:1"], cluster)
    # Reverse-binary order: cursor 1 << 63 reversed is 1, i.e. almost nothing walked.
    assert scanned_share(1 << 63) == pytest.approx(2**-64)
    assert scanned_share(1) == 0.5 and scanned_share(3) == 0.75


@pytest.mark.parametrize(
    "key",
    ["foo", "user:{42}:cart", "{}x", "{a}{b}", "a{b", "", "\u00e9t\u00e9", "{user1000}.following"],
)
def test_slot_matches_redis_py(key: str) -> None:
    assert key_slot(key) == redis_py_slot(key.encode())


def test_hash_tags() -> None:
    assert hash_tag(b"user:{42}:cart") == b"42"
    assert hash_tag(b"{}x") is None and hash_tag(b"a{b") is None
    assert key_slot("123456789") == 12739  # CRC16/XMODEM check value 0x31C3 % 16384


def test_hot_key_method_choice_and_hotkeys_reply() -> None:
    assert choose_method("allkeys-lfu", True, True) == "lfu"
    assert choose_method("allkeys-lru", True, True) == "hotkeys"
    assert choose_method("noeviction", False, True) == "published"
    assert choose_method("noeviction", False, False) is None
    reply = [b"tracking-active", 0, b"by-cpu-time-us", [b"x", 104, b"y", 98, b"z", 180]]
    assert parse_hotkeys_get(reply) == [(b"z", 180), (b"x", 104), (b"y", 98)]
    assert parse_hotkeys_get(None) == []


def test_delete_frees_with_unlink_else_lazy_del_else_step_by_step() -> None:
    assert choose_free(True, False) == "unlink"
    assert choose_free(False, True) == "del"
    assert choose_free(False, False) == "incremental"


def test_cluster_nodes_parsing() -> None:
    text = (
        "a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460\n"
        "b2 127.0.0.1:7001@17001,host master - 0 0 2 connected 5461-10922 [10923->-c3]\n"
        "c3 127.0.0.1:7003@17003 slave a1 0 0 1 connected\n"
    )
    nodes = parse_cluster_nodes(text)
    assert [(n["port"], n["slots"], n["master"]) for n in nodes] == [
        (7000, 5461, None),
        (7001, 5462, None),
        (7003, 0, "a1"),
    ]


def test_fragmentation_rule_on_snapshots() -> None:
    """SD004 on snapshots (a live server is not driven past 100 MB of fragmented live
    objects in a test: freeing after a peak does not raise mem_fragmentation_ratio, see
    tests/ops/test_doctor.py): over 1.5 warns, under 1 (swapped out) is an error, a small
    data set is skipped whatever its ratio."""
    from seawall.ops.doctor._snapshot import NodeSnapshot, Snapshot
    from seawall.ops.doctor.rules.memory import fragmentation

    def snapshot(used: int, ratio: float) -> Snapshot:
        node = NodeSnapshot(
            address="127.0.0.1:6379",
            info={"used_memory": used, "mem_fragmentation_ratio": ratio},
            config={}, commands={}, users_allowed={}, slowlog=[], memory_doctor=None,
            latency_doctor=None, latency_latest=[], clients=[],
        )  # fmt: skip
        return Snapshot(url="redis://127.0.0.1:6379", cluster=False, nodes=[node])

    big = 200 * 1024 * 1024
    (high,) = fragmentation.run(snapshot(big, 1.8))
    assert (high.rule, high.severity) == ("SD004", "warning")
    assert "mem_fragmentation_ratio is 1.80 on 127.0.0.1:6379" in high.message
    assert "activedefrag" in high.fix
    (swapped,) = fragmentation.run(snapshot(big, 0.7))
    assert swapped.severity == "error" and "swapped out" in swapped.message
    assert fragmentation.run(snapshot(big, 1.2)) == []
    assert fragmentation.run(snapshot(10 * 1024 * 1024, 4.0)) == []
