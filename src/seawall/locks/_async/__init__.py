"""Hand-written asyncio implementation of the lock family; `_sync/` is generated from it."""
