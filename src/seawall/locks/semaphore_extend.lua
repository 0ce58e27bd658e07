-- Extend a semaphore holder's lease, only if it still holds its permit: set it to
-- ARGV[2] ms from now, or (ARGV[3] "1") add ARGV[2] ms to what is left of it (server
-- time). Other holders' leases are untouched: renewing one never keeps a dead holder's
-- permit.
-- KEYS[1] holders (zset: token -> lease end, server ms)
-- ARGV[1] holder token     ARGV[2] milliseconds     ARGV[3] "1" to add, "" to set
-- returns the new lease in milliseconds (>= 1), 0 not the holder (its lease ended)
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
local ttl = tonumber(ARGV[2])
if ARGV[3] == '1' then
  -- What is left: the score is 1 ms past the lease's end (see semaphore_acquire.lua).
  ttl = math.max(tonumber(lease) - 1 - now, 0) + ttl
end
-- 1 ms past now + ttl: see semaphore_acquire.lua.
redis.call('zadd', KEYS[1], 'XX', now + ttl + 1, ARGV[1])
local last = redis.call('zrange', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('pexpireat', KEYS[1], last[2])
return ttl
