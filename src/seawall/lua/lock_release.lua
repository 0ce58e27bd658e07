-- Release a lock, only if the caller still holds it, and wake a waiting process.
-- KEYS[1] lock key        KEYS[2] waiting processes (zset)
-- KEYS[3] wake-up throttle: the id of the process woken moments ago
-- ARGV[1] owner token     ARGV[2] prefix of the waiters' wake-up channels
-- ARGV[3] starving: a waiter queued this long (ms) gets the lock handed to it
-- ARGV[4] how long a hand-off is reserved for its waiter (ms)
-- ARGV[5] wake-up throttle (ms): a process is not woken again within this period
-- returns 1 released, 0 not the owner (lease lost; nothing is touched)
--
-- A plain release lets anyone take the lock next, the releaser included: that keeps a busy
-- lock fast. The process waiting longest is woken, but not again within the throttle
-- period: a woken waiter that lost the race looks again by itself after that period, and
-- waking it sooner would only make it try in vain. Once it has waited past
-- the starving threshold, the lock is handed to it instead (a reservation only it can
-- take, which expires if it died), which bounds every wait.
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return 0
end
local head = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES')
if head[1] == nil then
  redis.call('del', KEYS[1])
  return 1
end
local now = redis.call('time')
local now_ms = now[1] * 1000 + math.floor(now[2] / 1000)
if now_ms - tonumber(head[2]) >= tonumber(ARGV[3]) then
  redis.call('zrem', KEYS[2], head[1])
  redis.call('set', KEYS[1], 'handoff:' .. head[1], 'PX', ARGV[4])
  redis.call('publish', ARGV[2] .. head[1], KEYS[1])
  return 1
end
redis.call('del', KEYS[1])
if redis.call('get', KEYS[3]) ~= head[1] then
  redis.call('set', KEYS[3], head[1], 'PX', ARGV[5])
  redis.call('publish', ARGV[2] .. head[1], KEYS[1])
end
return 1
