-- Write a cache entry, only under a current load lease (or unconditionally), and wake waiters.
-- Runs after cache_write.lua (write_entry).
-- KEYS[1] value: "<stale window ms>:<load ms>:<payload>"     KEYS[2] load lease
-- KEYS[3] waiting processes (set of ids)     KEYS[4] hit marker
-- KEYS[5] (optional, explicit sets only) the entry's version
-- ARGV[1] lease token of the loader ("" = an explicit set, which voids any lease)
-- ARGV[2] payload ("" = the loader found nothing: an absent entry)
-- ARGV[3] ttl of the entry (ms), fresh time plus stale window
-- ARGV[4] stale window (ms)
-- ARGV[5] duration of the load (ms), kept for early refresh
-- ARGV[6] prefix of the waiters' wake-up channels
-- ARGV[7] invalidation channel ("" = publish nothing: a load replaces only what was
--         missing or stale, which no process holds in memory)
-- ARGV[8] invalidation message (drop this key from every process's memory)
-- ARGV[9] largest payload (bytes) a wake-up carries; a larger one is read by the waiters
-- ARGV[10] lead (ms): the hit marker expires this long before the value turns stale
-- ARGV[11] (with KEYS[5]) the write's version, a decimal integer
-- returns 1 written (now, or by an earlier run of this call), 0 not written: the lease was
--         voided (a delete or set came after the load started) or ran out and was taken by
--         another loader; or, with a version, the stored version is not older
--
-- A versioned set writes only if its version is newer than the stored one (a tombstone of
-- a versioned delete counts), compared as decimal integers of any size; the version then
-- lives as long as the value. A replay finds its own version and its own entry: 1 again.
--
-- A delete removes the lease, so a loader that read the database before the delete can
-- never write its older value back afterwards.
--
-- A fresh hit is one MGET of the value and the hit marker, no script: both present means
-- fresh for at least the lead (the marker's value), the time a process may keep the value
-- in memory. Every write and delete replaces or removes all of an entry's keys at once.
--
-- Wake-up message: "<#KEYS[1]>:<KEYS[1]>" and, for a write-back under a lease, then
-- "<token>:<fresh ms>:<payload>", so a waiter that saw that lease needs no second read.
--
-- Idempotent: a replayed write-back (redis-py retrying a call whose reply was lost) finds
-- its lease gone but the very entry it wrote in place, and answers 1 again without
-- writing or waking anyone twice. An explicit set simply writes again.
local entry = ARGV[4] .. ':' .. ARGV[5] .. ':' .. ARGV[2]
if KEYS[5] then
  local stored = redis.call('get', KEYS[5])
  if stored then
    local newer = #ARGV[11] > #stored or (#ARGV[11] == #stored and ARGV[11] > stored)
    if not newer then
      if stored == ARGV[11] and redis.call('get', KEYS[1]) == entry then
        return 1
      end
      return 0
    end
  end
  redis.call('set', KEYS[5], ARGV[11], 'PX', ARGV[3])
end
if write_entry(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], entry, ARGV[2], ARGV[3], ARGV[4],
               ARGV[6], tonumber(ARGV[9] or '0'), tonumber(ARGV[10] or '0') or 0) == 0 then
  return 0
end
if ARGV[7] ~= '' then
  redis.call('publish', ARGV[7], ARGV[8])
end
return 1
