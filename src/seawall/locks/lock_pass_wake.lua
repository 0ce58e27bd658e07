-- Pass a wake-up on: the woken process has no waiter left for this lock (it timed out or
-- was cancelled). Drops a hand-off reserved for that process, then wakes the next process
-- if the lock is free; if it is held, its release will wake someone.
-- KEYS[1] lock key        KEYS[2] waiting processes (zset)
-- ARGV[1] prefix of the waiters' wake-up channels        ARGV[2] the woken process's id
-- returns 1 passed on, 0 nothing to do
local current = redis.call('get', KEYS[1])
if current == 'handoff:' .. ARGV[2] then
  redis.call('del', KEYS[1])
  current = false
end
if current ~= false then
  return 0
end
local head = redis.call('zrange', KEYS[2], 0, 0)
if head[1] then
  redis.call('publish', ARGV[1] .. head[1], KEYS[1])
  return 1
end
return 0
