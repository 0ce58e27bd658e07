"""Pure parts of seawall.Cache: XFetch, jitter, the L1, keys and serialization. No server."""

from __future__ import annotations

import math
import random

import pytest

from seawall.cache._codec import (
    ABSENT_PAYLOAD,
    cache_key,
    cache_keys,
    encode,
    make_serializer,
)
from seawall.cache._freshness import XFETCH_SPAN, hit_lead, jittered, xfetch_due
from seawall.cache._l1 import L1, MISSING
from seawall.errors import CacheSerializationError
from seawall.shared import _concurrency
from seawall.shared._keys import hash_tag

# --- acceptance 5: XFetch --------------------------------------------------------------------


def test_xfetch_probability_at_remaining_equal_to_delta_is_one_over_e() -> None:
    rand = random.Random(20260522).random
    draws = 100_000
    due = sum(xfetch_due(2.0, 2.0, 1.0, rand) for _ in range(draws))
    assert abs(due / draws - math.exp(-1)) <= 0.005, due / draws


def test_xfetch_probability_follows_beta_and_remaining() -> None:
    rand = random.Random(7).random
    draws = 20_000
    # P = exp(-remaining / (delta * beta)): beta 2 at remaining = delta gives e^-0.5.
    due = sum(xfetch_due(1.0, 1.0, 2.0, rand) for _ in range(draws))
    assert abs(due / draws - math.exp(-0.5)) < 0.015
    far = sum(xfetch_due(10.0, 1.0, 1.0, rand) for _ in range(draws))
    assert far / draws < 0.001
    assert xfetch_due(0.0, 1.0, 1.0, rand) is True  # expired: always
    assert xfetch_due(5.0, 0.0, 1.0, rand) is False  # no load time known: never early
    assert xfetch_due(1.0, 1.0, 1.0, lambda: 0.0) is False  # u = 1: ln 1 = 0, finite


def test_hit_lead_covers_the_l1_and_all_but_a_sliver_of_xfetch() -> None:
    assert hit_lead(0.0, None, 3.0) == 0.0  # no L1, no XFetch: plain hits until stale
    assert hit_lead(5.0, None, 3.0) == 5.0
    assert hit_lead(0.0, 2.0, 0.0) == 0.0  # no load time known: XFetch never draws
    assert hit_lead(1.0, 2.0, 0.5) == XFETCH_SPAN * 2.0 * 0.5
    assert hit_lead(100.0, 2.0, 0.5) == 100.0
    # Before the lead XFetch would refresh with chance below 1 in 2,000: skipping it
    # there changes nothing measurable.
    rand = random.Random(3).random
    lead = hit_lead(0.0, 1.0, 1.0)
    assert sum(xfetch_due(lead, 1.0, 1.0, rand) for _ in range(20_000)) <= 10
    assert math.exp(-XFETCH_SPAN) < 1 / 2000


# --- acceptance 7 (pure half): jitter ----------------------------------------------------------


def test_jitter_spreads_uniformly_within_ten_percent() -> None:
    rand = random.Random(3).random
    values = [jittered(60.0, 0.1, rand) for _ in range(100_000)]
    assert 54.0 <= min(values) < 54.1 and 65.9 < max(values) <= 66.0
    buckets = [0] * 12
    for value in values:
        buckets[min(int(value - 54.0), 11)] += 1
    assert max(buckets) < 1.1 * (100_000 / 12)
    assert jittered(60.0, 0.0, rand) == 60.0
    assert jittered(0.001, 0.5, lambda: 0.0) == 0.001  # never below 1 ms


# --- L1 --------------------------------------------------------------------------------------


def test_l1_is_bounded_lru_with_ttl(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(_concurrency, "monotonic", lambda: now[0])
    l1 = L1(2, ttl=1.0)
    l1.put("a", 1)
    l1.put("b", None)  # "absent" is a value too
    assert l1.get("a") == 1  # a is now the most recent
    l1.put("c", 3)
    assert l1.get("b") is MISSING and l1.get("a") == 1 and l1.get("c") == 3
    l1.put("short", 4, ttl=0.2)  # evicts a (least recent)
    assert l1.get("a") is MISSING
    now[0] += 0.3
    assert l1.get("short") is MISSING and l1.get("c") == 3
    now[0] += 0.8
    assert l1.get("c") is MISSING  # the L1 ttl bounds every entry
    l1.put("d", 5)
    l1.discard("d")
    assert l1.get("d") is MISSING
    l1.put("e", 6)
    l1.clear()
    assert l1.get("e") is MISSING
    off = L1(0, ttl=1.0)
    off.put("a", 1)
    assert off.get("a") is MISSING
    with pytest.raises(ValueError, match="l1_size"):
        L1(-1, ttl=1.0)


# --- keys and serialization --------------------------------------------------------------------


def test_keys_share_one_hash_tag() -> None:
    for user_key in ("42", "user:{7}", "}odd", "é"):
        keys = cache_keys("users", user_key)
        tags = {hash_tag(k) for k in keys.all}
        assert len(tags) == 1 and None not in tags, keys
    assert cache_keys("users", "1") != cache_keys("users:1", "")


@pytest.mark.parametrize("bad", [1.5, None, ("a",), object(), True, b"\xff"])
def test_bad_keys_are_refused(bad: object) -> None:
    with pytest.raises(TypeError, match="cache 'users'"):
        cache_key(bad, "users")


def test_key_forms() -> None:
    assert cache_key("a", "n") == "a" and cache_key(7, "n") == "7" and cache_key(b"b", "n") == "b"


def test_serializers_round_trip_and_refuse_clearly() -> None:
    json_codec = make_serializer("json")
    assert encode(json_codec, None, "n", "k") == ABSENT_PAYLOAD
    payload = encode(json_codec, {"a": [1, "é"]}, "n", "k")
    assert json_codec.loads(payload) == {"a": [1, "é"]}
    for bad in (object(), [range(3)]):
        with pytest.raises(CacheSerializationError, match="key 'k'"):
            encode(json_codec, bad, "n", "k")
    pickle_codec = make_serializer("pickle")
    assert pickle_codec.loads(encode(pickle_codec, {1, 2}, "n", "k")) == {1, 2}
    with pytest.raises(ValueError, match="serializer must be"):
        make_serializer("yaml")


def test_l1_clear_expires_but_keeps_bounded_stale_copies(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [10.0]
    monkeypatch.setattr(_concurrency, "monotonic", lambda: now[0])
    l1 = L1(10, ttl=5.0)
    l1.put("a", 1)
    epoch = l1.epoch
    l1.clear()
    assert l1.get("a") is MISSING  # never served normally after a clear
    assert l1.get_stale("a", max_age=2.0) == 1  # only for the Redis-down path
    now[0] += 2.5
    assert l1.get_stale("a", max_age=2.0) is MISSING
    l1.put("b", 2, epoch=epoch)  # a read that straddled the clear is not kept
    assert l1.get("b") is MISSING
    l1.put("b", 2, epoch=l1.epoch)
    assert l1.get("b") == 2
    l1.discard("b")
    assert l1.get_stale("b", max_age=100.0) is MISSING  # a discard drops it for good


def test_msgpack_serializer_round_trips_bytes_and_refuses_clearly() -> None:
    codec = make_serializer("msgpack")
    payload = encode(codec, {"blob": b"\x00\xff", "n": [1, 2]}, "n", "k")
    assert codec.loads(payload) == {"blob": b"\x00\xff", "n": [1, 2]}
    with pytest.raises(CacheSerializationError, match="msgpack"):
        encode(codec, object(), "n", "k")


def test_l1_replace_after_own_write_shuts_out_reads_begun_before_it() -> None:
    l1 = L1(10, 60.0)
    reader_epoch = l1.epoch  # a read of the old value began
    writer_epoch = l1.epoch  # our own write began
    l1.replace([("k", "new", 30.0)], writer_epoch)  # the write returned
    l1.put("k", "old", None, reader_epoch)  # the read lands late: refused
    assert l1.get("k") == "new"
    # Something invalidated the key while our write ran: nothing is kept.
    writer_epoch = l1.epoch
    l1.discard("other")
    l1.replace([("k", "newer", 30.0)], writer_epoch)
    assert l1.get("k") is MISSING
    l1.replace([("k", "v", 30.0)], None)  # not listening: only dropped
    assert l1.get("k") is MISSING


def test_bulk_writes_go_100_entries_a_call_and_one_slot_a_call_on_cluster() -> None:
    from redis.crc import key_slot

    from seawall.cache._sync.writes import STORE_GROUP, store_groups

    entries = [cache_keys("ns", f"k{i}") for i in range(250)]
    assert store_groups(entries, cluster=False) == [
        list(range(0, 100)),
        list(range(100, 200)),
        list(range(200, 250)),
    ]
    # Keys with the user's own hash tag share one slot: written together, 100 a call.
    shared = [cache_keys("ns", f"{{user:7}}:{i}") for i in range(STORE_GROUP + 5)]
    groups = store_groups(entries + shared, cluster=True)
    assert sorted(i for group in groups for i in group) == list(range(len(entries) + len(shared)))
    for group in groups:
        assert len(group) <= STORE_GROUP
        slots = {key_slot(name.encode()) for i in group for name in (entries + shared)[i].all}
        assert len(slots) == 1, group
    assert max(len(group) for group in groups) == STORE_GROUP  # the shared slot, split
