"""The Bloom filter: `seawall.BloomFilter` and `seawall.aio.BloomFilter` (docs/bloom.md).

What it keeps right: "surely absent" is never said of an item that was added (no false
negatives, Cluster included), a filter's size and hash count are fixed by its signature so
processes that disagree are refused, and a filter lost with its server is reported, not
read as empty.

Inside: `_async/` (hand-written) and `_sync/` (generated) hold the filter; `_arithmetic`
its sizing, item encoding and bit positions (no I/O); `bloom_*.lua` its scripts.
"""
