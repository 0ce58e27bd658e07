-- incr()/decr(): add to an integer value, only if the key exists, keeping its expiry.
-- KEYS[1] the value (an integer stored as its decimal digits, as Django's RedisCache
--         stores ints)
-- KEYS[2] (optional) the key's stale copy (OPTIONS stale_ttl): dropped by the change
-- ARGV[1] the delta, a decimal integer
-- returns {1, new value}
--         {0}     no such key (Django's incr() raises ValueError)
--         {-1}    the value is not an integer (a pickled value)
-- One step: checked and added in the same script, so a key expiring between the check
-- and the add never comes back as a key without expiry (EXISTS then INCRBY would).
local value = redis.call('get', KEYS[1])
if not value then
  return {0}
end
if not string.match(value, '^%-?%d+$') then
  return {-1}
end
local result = redis.call('incrby', KEYS[1], ARGV[1])
if KEYS[2] then
  redis.call('del', KEYS[2])
end
return {1, result}
