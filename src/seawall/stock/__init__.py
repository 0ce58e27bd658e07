"""Flash-sale inventory and exactly-once processing: `Stock`, `OrderSink`, `Idempotent`
(docs/stock.md, docs/orders.md).

What it keeps right: a stock never sells more than it has, and a retried order id never
takes twice (one script checks, takes and records the order); every take and cancel
reaches the SQL orders table exactly once, acknowledged only after COMMIT; a message's
handler runs at most once per id while its lease holds, and its outcome is kept.

Inside: `_async/` (hand-written) and `_sync/` (generated) hold Stock, OrderSink and
Idempotent; beside them the pure rules (`_stock`: arguments and script replies;
`_orders`: what reaches SQL; `_sql`: the orders table on SQLite, PostgreSQL, MySQL;
`_dedupe`: a write and its dedupe row in one transaction) and the Lua scripts.
"""
