-- Take the write lock of a reader-writer lock if nobody holds it and no admitted reader is
-- still on its way; otherwise record the caller's process as a waiting writer (its intent,
-- which holds new readers back until it expires or the process takes the lock).
-- KEYS[1] writer key (the writer's token)       KEYS[2] readers (zset: token -> expiry ms)
-- KEYS[3] waiting writers (zset: process id -> intent expiry ms)
-- KEYS[4] waiting readers (zset: process id -> expiry ms)
-- KEYS[5] readers admitted past waiting writers (set of process ids)   KEYS[6] fence counter
-- ARGV[1] writer token    ARGV[2] ttl in milliseconds
-- ARGV[3] waiter id of the caller's process, or "" to try without queueing
-- ARGV[4] how long the intent lasts unless refreshed by a later try (ms)
-- ARGV[5] "1" if the caller's process may already be queued (then a success dequeues it)
-- A try that neither queues nor may be queued passes ARGV[1..2] only.
-- returns {1, fence}   acquired; fence is strictly greater than every earlier write hold's
--         {0, pttl}    refused; pttl is how long (ms) the blocker lasts unless renewed
--                      (-1: no expiry)
--
-- Idempotent for its token: a replay (redis-py retrying a call whose reply was lost) finds
-- the writer key holding the caller's token and answers {1, the same fence} again (the
-- counter moves only on write grants, and none can happen while the token holds it).
--
-- Fences survive the loss of their counter: see lock_acquire.lua and docs/fences.md. The
-- counter expires max(1 day, 10 ttls) after it was made, as a Lock's.
redis.replicate_commands()
local t = redis.call('time')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local waiter = ARGV[3] or ''
local hint = redis.call('pttl', KEYS[1])
local fence = nil
if hint ~= -2 and redis.call('get', KEYS[1]) == ARGV[1] then
  fence = tonumber(redis.call('get', KEYS[6]))
  hint = -2
end
if hint == -2 and not fence then
  -- The read lease that ends first, among the live ones (dead readers are purged on the
  -- way, only when there are any: leases are scored by their end).
  local first = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES')
  if first[1] and tonumber(first[2]) <= now then
    redis.call('zremrangebyscore', KEYS[2], '-inf', now)
    first = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES')
  end
  if first[1] then
    hint = tonumber(first[2]) - now
  end
end
if hint == -2 and not fence then
  -- Admitted readers that still wait go first; those that entered, gave up or died
  -- (their queue entry expired) are forgotten.
  local admitted = redis.call('smembers', KEYS[5])
  if admitted[1] then
    redis.call('zremrangebyscore', KEYS[4], '-inf', now)
  end
  for _, id in ipairs(admitted) do
    if redis.call('zscore', KEYS[4], id) then
      hint = redis.call('pttl', KEYS[5])
    else
      redis.call('srem', KEYS[5], id)
    end
  end
end
if hint == -2 then
  if ARGV[5] == '1' then
    redis.call('zrem', KEYS[3], waiter)
  end
  if not fence then
    redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
    fence = next_fence(KEYS[6], ARGV[2])
  end
  return {1, fence}
end
if waiter ~= '' then
  redis.call('zremrangebyscore', KEYS[3], '-inf', now)
  redis.call('zadd', KEYS[3], now + tonumber(ARGV[4]), waiter)
  -- Only ever lengthened: another waiter's entry may last longer than this one's.
  if redis.call('pttl', KEYS[3]) < tonumber(ARGV[4]) then
    redis.call('pexpire', KEYS[3], ARGV[4])
  end
end
return {0, hint}
