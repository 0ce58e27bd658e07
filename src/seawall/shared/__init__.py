"""What every family uses; no family's behaviour lives here.

- `_concurrency`: what differs between sync and asyncio code, under paired names
  (`AsyncEvent`/`Event`, `async_sleep`/`sleep`, ...) that scripts/unasync.py rewrites;
  `_fanout`: one request to several nodes at once; `_bounded`: Redis calls bounded by a
  deadline, whatever the client's socket timeout.
- `_scripts` and `_async/scripts.py`: Lua scripts loaded from their family's folder and run
  by one EVALSHA helper, on a pooled connection without redis-py's per-command hooks where
  that is all its command path would do (`_direct`); `_eviction` and
  `_async/eviction.py`: the check that a server will not evict coordination keys.
- `_validate`: argument and client checks; `_keys`: key naming and hash tags; `_tokens`:
  random owner and lease tokens, a batch per system call.

Imports point one way: families import shared, never the reverse.
"""
