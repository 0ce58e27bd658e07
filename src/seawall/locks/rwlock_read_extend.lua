-- Extend one reader's lease, only if it is still live; leases of other readers are purged
-- when expired and never extended here. The lease is set to ARGV[2] ms, or (ARGV[4] "1")
-- ARGV[2] ms are added to what is left of it (server time).
-- KEYS[1] readers (zset: token -> expiry ms)
-- ARGV[1] reader token    ARGV[2] milliseconds
-- ARGV[3] "1" to only check the lease (extend nothing)    ARGV[4] "1" to add, "" to set
-- returns the new lease in milliseconds (>= 1; 1 when only checked), 0 not held
redis.replicate_commands()
local t = redis.call('time')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('zremrangebyscore', KEYS[1], '-inf', now)
local lease = redis.call('zscore', KEYS[1], ARGV[1])
if not lease then
  return 0
end
if ARGV[3] == '1' then
  return 1
end
local ttl = tonumber(ARGV[2])
if ARGV[4] == '1' then
  -- What is left: the score is 1 ms past the lease's end (see semaphore_acquire.lua).
  ttl = math.max(tonumber(lease) - 1 - now, 0) + ttl
end
-- 1 ms past now + ttl: see semaphore_acquire.lua.
redis.call('zadd', KEYS[1], 'XX', now + ttl + 1, ARGV[1])
if redis.call('pttl', KEYS[1]) < ttl then
  redis.call('pexpire', KEYS[1], ttl)
end
return ttl
