"""Hand-written asyncio implementation of the Bloom filter; `_sync/` is generated from it."""
