"""Hand-written asyncio script runner and eviction check; `_sync/` is generated from it."""
