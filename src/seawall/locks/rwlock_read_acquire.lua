-- Take a read lease of a reader-writer lock, unless a writer holds it or waits for it;
-- otherwise queue the caller's process to be woken.
-- KEYS[1] writer key (the writer's token)       KEYS[2] readers (zset: token -> expiry ms)
-- KEYS[3] waiting writers (zset: process id -> intent expiry ms)
-- KEYS[4] waiting readers (zset: process id -> expiry ms)
-- KEYS[5] readers admitted past waiting writers (set of process ids)   KEYS[6] fence counter
-- ARGV[1] reader token    ARGV[2] ttl in milliseconds
-- ARGV[3] waiter id of the caller's process, or "" to try without queueing
-- ARGV[4] how long a queue entry lasts unless refreshed by a later try (ms)
-- ARGV[5] "1" if the caller's process may already be queued (then a success dequeues it)
-- A try that neither queues nor may be queued passes ARGV[1..2] only.
-- returns {1, fence}   acquired; fence is that of the newest write hold (0: none yet)
--         {0, pttl}    refused; pttl is how long (ms) the blocker lasts unless renewed
--                      (-1: no expiry)
--
-- Every lease and intent is scored by its own expiry in server time, so no live reader
-- keeps a dead one's lease (or a dead writer's intent) alive: expired ones are skipped by
-- score, and purged where they would be counted (the releases, the writer's try).
-- Uncontended, a try is TIME, PTTL, ZRANGEBYSCORE, ZADD, PTTL (+ PEXPIRE), GET.
--
-- Idempotent for its token: a replay (redis-py retrying a call whose reply was lost) finds
-- the token's live read lease and answers {1, fence} again, even if a writer has begun to
-- wait since (its intent holds back new readers, not this one, which already holds); a
-- replay that finds the lock free takes the lease again from now.
redis.replicate_commands()
local t = redis.call('time')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local waiter = ARGV[3] or ''
local function fence()
  return {1, tonumber(redis.call('get', KEYS[6]) or '0')}
end
local function dequeue()
  if ARGV[5] == '1' then
    redis.call('zrem', KEYS[4], waiter)
    redis.call('srem', KEYS[5], waiter)
  end
end
local hint = redis.call('pttl', KEYS[1])
if hint == -2 then
  -- The waiting writer whose intent lasts least, among those still live.
  local first = redis.call('zrangebyscore', KEYS[3], '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  -- Writer preference: once a writer waits, only readers that were already waiting when
  -- the last writer released (admitted then) go ahead of it.
  if first[1] and (waiter == '' or redis.call('sismember', KEYS[5], waiter) == 0) then
    hint = tonumber(first[2]) - now
  end
end
if hint == -2 then
  local ttl = tonumber(ARGV[2])
  -- 1 ms past now + ttl: see semaphore_acquire.lua. (A replay's lease moves with it.)
  redis.call('zadd', KEYS[2], now + ttl + 1, ARGV[1])
  -- The zset outlives its longest lease, never a lease its own member does not renew.
  if redis.call('pttl', KEYS[2]) < ttl then
    redis.call('pexpire', KEYS[2], ttl)
  end
  dequeue()
  return fence()
end
local lease = redis.call('zscore', KEYS[2], ARGV[1])
if lease and tonumber(lease) > now then
  -- A replay whose first run took the lease (a writer may have come since: its intent
  -- holds back new readers, not this one, which already holds).
  dequeue()
  return fence()
end
if waiter ~= '' then
  redis.call('zremrangebyscore', KEYS[4], '-inf', now)
  redis.call('zadd', KEYS[4], now + tonumber(ARGV[4]), waiter)
  -- Only ever lengthened: another waiter's entry may last longer than this one's.
  if redis.call('pttl', KEYS[4]) < tonumber(ARGV[4]) then
    redis.call('pexpire', KEYS[4], ARGV[4])
  end
end
return {0, hint}
