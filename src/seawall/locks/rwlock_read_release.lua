-- Give a read lease back, only if it is still live, and wake a waiting writer when the
-- last reader leaves.
-- KEYS[1] readers (zset: token -> expiry ms)
-- KEYS[2] waiting writers (zset: process id -> intent expiry ms)
-- ARGV[1] reader token    ARGV[2] prefix of the waiters' wake-up channels
-- ARGV[3] the writers' wake-up key (what their waker listens for)
-- KEYS[3] released tokens (list, newest first; shared with the write side)
-- returns 1 released (now, or by an earlier run of this call), 0 not held (the lease ran
--         out, or was never taken)
--
-- Idempotent for its token: as lock_release.lua, the last 16 released tokens are kept 5
-- minutes, so a replay whose first run released answers 1 again.
redis.replicate_commands()
local t = redis.call('time')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('zremrangebyscore', KEYS[1], '-inf', now)
redis.call('zremrangebyscore', KEYS[2], '-inf', now)
if redis.call('zrem', KEYS[1], ARGV[1]) == 0 then
  for _, gone in ipairs(redis.call('lrange', KEYS[3], 0, -1)) do
    if gone == ARGV[1] then
      return 1
    end
  end
  return 0
end
redis.call('lpush', KEYS[3], ARGV[1])
redis.call('ltrim', KEYS[3], 0, 15)
redis.call('pexpire', KEYS[3], 300000)
if redis.call('zcard', KEYS[1]) == 0 then
  -- The writer that refreshed its intent last: a writer that died while waiting has
  -- the oldest refresh, so a wake-up is not lost on it.
  local head = redis.call('zrange', KEYS[2], -1, -1)
  if head[1] then
    redis.call('publish', ARGV[2] .. head[1], ARGV[3])
  end
end
return 1
