"""Hand-written asyncio implementation of the cache; `_sync/` is generated from it."""
