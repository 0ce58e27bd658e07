"""What the eviction check decides, without a server (seawall/shared/_eviction.py)."""

from __future__ import annotations

import gc

import redis

from seawall.shared import _eviction


def test_which_policies_evict() -> None:
    for policy in ("allkeys-lru", "allkeys-lfu", "allkeys-random"):
        assert _eviction.evicts(policy)
    for policy in ("volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl"):
        assert _eviction.evicts(policy)
    assert not _eviction.evicts("noeviction")


def test_policy_of_reads_bytes_and_str_replies() -> None:
    assert _eviction.policy_of({b"maxmemory-policy": b"allkeys-lru"}) == "allkeys-lru"
    assert _eviction.policy_of({"maxmemory-policy": "noeviction"}) == "noeviction"
    assert _eviction.policy_of({}) is None
    assert _eviction.by_policy([("a:1", {"maxmemory-policy": "noeviction"}), ("b:2", {})]) == {
        "noeviction": ["a:1"],
        "unknown": ["b:2"],
    }


def test_warnings_name_the_setting_the_keys_and_the_fix() -> None:
    allkeys = _eviction.warning("allkeys-lru", ["h:1", "h:2"])
    assert "Redis at h:1, h:2 has maxmemory-policy allkeys-lru" in allkeys
    assert "fence counters" in allkeys and "order records" in allkeys
    volatile = _eviction.warning("volatile-ttl", ["h:1"])
    assert "keys that have a TTL" in volatile and "Idempotent records" in volatile
    assert "Bloom filters have no TTL" in volatile
    for text in (allkeys, volatile):
        assert "maxmemory-policy noeviction" in text and "separate Redis" in text


def test_only_the_first_guarded_script_of_a_client_checks() -> None:
    client = redis.Redis(port=1)
    assert not _eviction.claim(client, "cache_fetch")  # a cache's keys may be evicted
    assert _eviction.claim(client, "lock_acquire")
    assert not _eviction.claim(client, "stock_take")
    assert _eviction.claim(redis.Redis(port=1), "fenced_write")


def test_a_collected_client_is_forgotten() -> None:
    # Clients are remembered by id: a new client at a collected one's address is checked.
    client = redis.Redis(port=1)
    assert _eviction.claim(client, "lock_acquire")
    address = id(client)
    del client
    gc.collect()
    assert address not in _eviction._checked


def test_describe_names_the_server() -> None:
    assert _eviction.describe(redis.Redis(host="10.0.0.7", port=6380)) == "10.0.0.7:6380"
    assert _eviction.describe(redis.Redis(unix_socket_path="/tmp/r.sock")) == "/tmp/r.sock"
