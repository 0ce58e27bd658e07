-- Write a value only if the writer's fence is newer than the last accepted one.
-- KEYS[1] guarded hash (fields "value" and "fence")
-- ARGV[1] writer's fence (a positive integer)   ARGV[2] value
-- returns 1 written, 0 rejected: a holder with a newer or equal fence already wrote
local current = tonumber(redis.call('hget', KEYS[1], 'fence') or '0')
if tonumber(ARGV[1]) > current then
  redis.call('hset', KEYS[1], 'value', ARGV[2], 'fence', ARGV[1])
  return 1
end
return 0
