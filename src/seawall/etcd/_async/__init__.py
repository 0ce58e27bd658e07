"""Hand-written asyncio implementation of seawall.etcd; `_sync/` is generated from it."""
