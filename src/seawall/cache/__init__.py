"""The two-level cache: `seawall.Cache` and `seawall.aio.Cache` (docs/cache.md).

What it keeps right: one loader call per key per expiry across every process (a lease in
Redis, waiters woken, never a stampede); every process's L1 dropped when any process
writes or deletes (an invalidation broadcast); no value older than a delete, a newer
version or a clear() served once they return (tombstones, versions, generations); stale
answers only within the stale window, while one refresh runs.

Inside: `_async/` (hand-written) and `_sync/` (generated) hold the cache, its load path,
bulk calls, writes, tags, generations, the delayed second delete, wake-ups and the
invalidation broadcast; beside them the pure cores (`_codec`, `_json`, `_l1`,
`_freshness`, `_call_keys`, `_hotkeys`, `_breaker`, `_stats`,
`_invalidation_message`) and the Lua scripts (`cache_*.lua`).
"""
