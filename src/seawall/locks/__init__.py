"""The lock family: `Lock`, `RLock`, `RWLock`, `Semaphore`, `Redlock` and fenced writes
(docs/fences.md, docs/rlock.md, docs/rwlock.md, docs/semaphore.md, docs/redlock.md).

What it keeps right: a lock is held by one owner at a time and released only by it; a
lease that runs out is never mistaken for a hold (leases on server time, renewed while
held); every hold carries a fence, strictly increasing per name, that stops a paused
holder's late writes; waiters are woken, served in order, and every wait is bounded.

Inside: `_async/` (hand-written) and `_sync/` (generated) hold the primitives, what they
share (`holder`: holds per owner, their loss and renewal), the lease renewer, wake-ups,
replica acknowledgements and metrics; beside them the pure cores (`_lease`, `_holds`,
`_redlock`, `_rwpolicy`, `_replication`) and the Lua scripts. seawall.etcd and
seawall.zookeeper build their locks on the same holder.
"""
