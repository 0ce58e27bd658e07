-- Give a read lease back, only if it is still live, and wake a waiting writer when the
-- last reader leaves.
-- KEYS[1] readers (zset: token -> expiry ms)
-- KEYS[2] waiting writers (zset: process id -> intent expiry ms)
-- ARGV[1] reader token    ARGV[2] prefix of the waiters' wake-up channels
-- ARGV[3] the writers' wake-up key (what their waker listens for)
-- returns 1 released, 0 not held (the lease ran out, or was never taken)
local t = redis.call('time')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('zremrangebyscore', KEYS[1], '-inf', now)
redis.call('zremrangebyscore', KEYS[2], '-inf', now)
if redis.call('zrem', KEYS[1], ARGV[1]) == 0 then
  return 0
end
if redis.call('zcard', KEYS[1]) == 0 then
  -- The writer that refreshed its intent last: a writer that died while waiting has
  -- the oldest refresh, so a wake-up is not lost on it.
  local head = redis.call('zrange', KEYS[2], -1, -1)
  if head[1] then
    redis.call('publish', ARGV[2] .. head[1], ARGV[3])
  end
end
return 1
