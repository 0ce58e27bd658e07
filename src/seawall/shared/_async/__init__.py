"""Hand-written asyncio implementations; `seawall/_sync/` is generated from these."""
