-- Write a cache entry, only under a current load lease (or unconditionally), and wake waiters.
-- KEYS[1] value hash     KEYS[2] load lease     KEYS[3] waiting processes (set of ids)
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
-- returns 1 written, 0 not written: the lease was voided (a delete or set came after the
--         load started) or ran out and was taken by another loader
--
-- A delete removes the lease, so a loader that read the database before the delete can
-- never write its older value back afterwards.
--
-- Wake-up message: "<#KEYS[1]>:<KEYS[1]>" and, for a write-back under a lease, then
-- "<token>:<fresh ms>:<payload>", so a waiter that saw that lease needs no second read.
if ARGV[1] ~= '' and redis.call('get', KEYS[2]) ~= ARGV[1] then
  return 0
end
redis.call('del', KEYS[1], KEYS[2])
redis.call('hset', KEYS[1], 'v', ARGV[2], 's', ARGV[4], 'd', ARGV[5])
redis.call('pexpire', KEYS[1], ARGV[3])
local waiting = redis.call('smembers', KEYS[3])
local wake = string.format('%d:%s', #KEYS[1], KEYS[1])
if ARGV[1] ~= '' and #ARGV[2] <= tonumber(ARGV[9] or '0') then
  local fresh = tonumber(ARGV[3]) - tonumber(ARGV[4])
  wake = wake .. ARGV[1] .. ':' .. string.format('%d', fresh) .. ':' .. ARGV[2]
end
for _, id in ipairs(waiting) do
  redis.call('publish', ARGV[6] .. id, wake)
end
if #waiting > 0 then
  redis.call('del', KEYS[3])
end
if ARGV[7] ~= '' then
  redis.call('publish', ARGV[7], ARGV[8])
end
return 1
