"""Hand-written asyncio Stock, OrderSink and Idempotent; `_sync/` is generated from it."""
