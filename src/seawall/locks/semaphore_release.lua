-- Give a permit back, only if the caller still holds it, and wake as many waiting
-- processes (oldest first) as there are free permits.
-- KEYS[1] holders (zset: token -> lease end, server ms)
-- KEYS[2] waiting processes (zset: id -> arrival)     KEYS[3] the same ids -> lapse time
-- ARGV[1] holder token     ARGV[2] number of permits
-- ARGV[3] prefix of the waiters' wake-up channels
-- KEYS[4] this token's release record: the memory that makes a replay idempotent
-- ARGV[4] how long a release record lasts at least (ms): longer than redis-py's retries
-- returns 1 released (now, or by an earlier run of this call), 0 not the holder (its lease
--         ended; another may hold the permit)
--
-- Idempotent for its token: as lock_release.lua, a release leaves a record of its token
-- (for what was left of the lease, at least ARGV[4]), so a replay whose first run
-- released answers 1 again; a lease that ended before its release is never recorded, so
-- its release still answers 0.
redis.replicate_commands()
local now = redis.call('time')
now = now[1] * 1000 + math.floor(now[2] / 1000)
local lease = redis.call('zscore', KEYS[1], ARGV[1])
local held = lease and tonumber(lease) > now
if lease then
  redis.call('zrem', KEYS[1], ARGV[1])
end
if redis.call('exists', KEYS[2]) == 1 then
  redis.call('zremrangebyscore', KEYS[1], '-inf', now)
  local gone = redis.call('zrangebyscore', KEYS[3], '-inf', now)
  for _, id in ipairs(gone) do
    redis.call('zrem', KEYS[2], id)
    redis.call('zrem', KEYS[3], id)
  end
  local free = tonumber(ARGV[2]) - redis.call('zcard', KEYS[1])
  if free > 0 then
    for _, id in ipairs(redis.call('zrange', KEYS[2], 0, free - 1)) do
      redis.call('publish', ARGV[3] .. id, KEYS[1])
    end
  end
end
if held then
  redis.call('set', KEYS[4], '1', 'PX', math.max(tonumber(lease) - now, tonumber(ARGV[4])))
  return 1
end
if not lease then
  return redis.call('exists', KEYS[4])
end
return 0
