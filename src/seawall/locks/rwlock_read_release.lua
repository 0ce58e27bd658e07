-- Give a read lease back, only if it is still live, and wake a waiting writer when the
-- last reader leaves.
-- KEYS[1] readers (zset: token -> expiry ms)
-- KEYS[2] waiting writers (zset: process id -> intent expiry ms)
-- ARGV[1] reader token    ARGV[2] prefix of the waiters' wake-up channels
-- ARGV[3] the writers' wake-up key (what their waker listens for)
-- KEYS[3] this token's release record       ARGV[4] how long it lasts (ms)
-- returns 1 released (now, or by an earlier run of this call), 0 not held (the lease ran
--         out, or was never taken)
--
-- Idempotent for its token: as lock_release.lua, a release leaves a record of its token,
-- so a replay whose first run released answers 1 again.
redis.replicate_commands()
local t = redis.call('time')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('zremrangebyscore', KEYS[1], '-inf', now)
if redis.call('zrem', KEYS[1], ARGV[1]) == 0 then
  return redis.call('exists', KEYS[3])
end
redis.call('set', KEYS[3], '1', 'PX', ARGV[4])
if redis.call('zcard', KEYS[1]) == 0 then
  -- The live writer that refreshed its intent last: a writer that died while waiting has
  -- the oldest refresh (and soon an expired one), so a wake-up is not lost on it.
  local head = redis.call('zrevrangebyscore', KEYS[2], '+inf', '(' .. now, 'LIMIT', 0, 1)
  if head[1] then
    redis.call('publish', ARGV[2] .. head[1], ARGV[3])
  end
end
return 1
