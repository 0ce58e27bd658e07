"""Hand-written asyncio implementation of the session store; `_sync/` is generated from it."""
