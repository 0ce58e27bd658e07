-- Release a lock, only if the caller still holds it, and wake a waiting process.
-- KEYS[1] lock key        KEYS[2] waiting processes (zset)
-- KEYS[3] wake-up throttle: the id of the process woken moments ago
-- KEYS[4] released tokens (list, newest first): the memory that makes a replay idempotent
-- ARGV[1] owner token     ARGV[2] prefix of the waiters' wake-up channels
-- ARGV[3] starving: a waiter queued this long (ms) gets the lock handed to it
-- ARGV[4] how long a hand-off is reserved for its waiter (ms)
-- ARGV[5] wake-up throttle (ms): a process is not woken again within this period
-- returns 1 released (now, or by an earlier run of this call), 0 not the owner (lease
--         lost; nothing is touched)
--
-- A plain release lets anyone take the lock next, the releaser included: that keeps a busy
-- lock fast. The process waiting longest is woken, but not again within the throttle
-- period: a woken waiter that lost the race looks again by itself after that period, and
-- waking it sooner would only make it try in vain. Once it has waited past
-- the starving threshold, the lock is handed to it instead (a reservation only it can
-- take, which expires if it died), which bounds every wait.
--
-- Idempotent for its token: a release records its token in KEYS[4] (the last 16 tokens,
-- kept 5 minutes after the latest release, longer than redis-py's retries of one call), so
-- a replay whose first run released answers 1 again, while a token whose lease lapsed
-- (never released by its owner) still answers 0, whoever took the lock since.
redis.replicate_commands()
local function released()
  redis.call('lpush', KEYS[4], ARGV[1])
  redis.call('ltrim', KEYS[4], 0, 15)
  redis.call('pexpire', KEYS[4], 300000)
  return 1
end
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  for _, gone in ipairs(redis.call('lrange', KEYS[4], 0, -1)) do
    if gone == ARGV[1] then
      return 1
    end
  end
  return 0
end
local head = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES')
if head[1] == nil then
  redis.call('del', KEYS[1])
  return released()
end
local now = redis.call('time')
local now_ms = now[1] * 1000 + math.floor(now[2] / 1000)
if now_ms - tonumber(head[2]) >= tonumber(ARGV[3]) then
  redis.call('zrem', KEYS[2], head[1])
  redis.call('set', KEYS[1], 'handoff:' .. head[1], 'PX', ARGV[4])
  redis.call('publish', ARGV[2] .. head[1], KEYS[1])
  return released()
end
redis.call('del', KEYS[1])
if redis.call('get', KEYS[3]) ~= head[1] then
  redis.call('set', KEYS[3], head[1], 'PX', ARGV[5])
  redis.call('publish', ARGV[2] .. head[1], KEYS[1])
end
return released()
