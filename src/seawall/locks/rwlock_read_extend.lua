-- Extend one reader's lease, only if it is still live; leases of other readers are purged
-- when expired and never extended here.
-- KEYS[1] readers (zset: token -> expiry ms)
-- ARGV[1] reader token    ARGV[2] new ttl in milliseconds
-- ARGV[3] "1" to only check the lease (extend nothing)
-- returns 1 extended (or live), 0 not held
redis.replicate_commands()
local t = redis.call('time')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('zremrangebyscore', KEYS[1], '-inf', now)
if not redis.call('zscore', KEYS[1], ARGV[1]) then
  return 0
end
if ARGV[3] == '1' then
  return 1
end
local ttl = tonumber(ARGV[2])
-- 1 ms past now + ttl: see semaphore_acquire.lua.
redis.call('zadd', KEYS[1], 'XX', now + ttl + 1, ARGV[1])
if redis.call('pttl', KEYS[1]) < ttl then
  redis.call('pexpire', KEYS[1], ttl)
end
return 1
