-- Extend a semaphore holder's lease, only if it still holds its permit. Other holders'
-- leases are untouched: renewing one never keeps a dead holder's permit.
-- KEYS[1] holders (zset: token -> lease end, server ms)
-- ARGV[1] holder token     ARGV[2] new ttl in milliseconds (from now)
-- returns 1 extended, 0 not the holder (its lease ended)
redis.replicate_commands()
local now = redis.call('time')
now = now[1] * 1000 + math.floor(now[2] / 1000)
local lease = redis.call('zscore', KEYS[1], ARGV[1])
if not lease or tonumber(lease) <= now then
  if lease then
    redis.call('zrem', KEYS[1], ARGV[1])
  end
  return 0
end
-- 1 ms past now + ttl: see semaphore_acquire.lua.
redis.call('zadd', KEYS[1], 'XX', now + tonumber(ARGV[2]) + 1, ARGV[1])
local last = redis.call('zrange', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('pexpireat', KEYS[1], last[2])
return 1
