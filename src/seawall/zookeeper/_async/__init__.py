"""Hand-written asyncio implementation of seawall.zookeeper; `_sync/` is generated from it."""
