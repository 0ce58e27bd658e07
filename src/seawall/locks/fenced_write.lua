-- Write a value only if the writer's fence is newer than the last accepted one.
-- KEYS[1] guarded hash (fields "value" and "fence")
-- ARGV[1] writer's fence (a positive integer below 2^53, as seawall's fences are)
-- ARGV[2] value
-- returns 1 written (now, or by an earlier run of this call), 0 rejected: a holder with a
--         newer fence already wrote, or this fence already wrote another value
--
-- Idempotent: a replay (redis-py retrying a call whose reply was lost) finds its own fence
-- and value stored and answers 1 again. Fences are compared as Lua numbers (doubles),
-- exact below 2^53; the fence is stored as the caller's decimal string, never reformatted.
local stored = redis.call('hmget', KEYS[1], 'fence', 'value')
local current = tonumber(stored[1] or '0')
local fence = tonumber(ARGV[1])
if fence > current then
  redis.call('hset', KEYS[1], 'value', ARGV[2], 'fence', ARGV[1])
  return 1
end
if fence == current and stored[2] == ARGV[2] then
  return 1
end
return 0
