-- Take a Redlock on one master (one of several independent masters), and number the grant.
-- KEYS[1] lock key        KEYS[2] fence counter of the lock name on this master
-- ARGV[1] owner token     ARGV[2] ttl in milliseconds
-- ARGV[3] floor: the highest fence the caller has seen for this name (0 if none); the
--         counter is first raised to it, so the masters' counters stay close together
-- returns {1, counter}    granted; counter is this master's fence counter after INCR
--         {0, pttl}       held by another; pttl is its remaining time in ms (-1: no expiry)
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local floor = tonumber(ARGV[3])
  if floor > tonumber(redis.call('get', KEYS[2]) or '0') then
    redis.call('set', KEYS[2], floor)
  end
  return {1, redis.call('incr', KEYS[2])}
end
return {0, redis.call('pttl', KEYS[1])}
