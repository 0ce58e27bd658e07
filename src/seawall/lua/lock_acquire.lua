-- Take a lock if it is free, and number this hold.
-- KEYS[1] lock key           KEYS[2] fence counter (same hash tag)
-- ARGV[1] owner token        ARGV[2] ttl in milliseconds
-- returns {1, fence}  acquired; fence is strictly greater than every earlier hold's
--         {0, pttl}   held by another; pttl is its remaining time in ms (-1: no expiry)
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, redis.call('incr', KEYS[2])}
end
return {0, redis.call('pttl', KEYS[1])}
