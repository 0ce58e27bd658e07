"""Cache invalidation from the database's own change log (`seawall follow`).

A follower reads a source's log (PostgreSQL logical decoding, the MariaDB/MySQL row
binlog), invalidates the cache entries of every changed row, and checkpoints its position
in Redis only after the invalidations before it are done, at transaction boundaries.
"""
