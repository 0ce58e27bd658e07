-- Take a Redlock on one master (one of several independent masters), and number the grant.
-- KEYS[1] lock key        KEYS[2] fence counter of the lock name on this master
-- ARGV[1] owner token     ARGV[2] ttl in milliseconds
-- ARGV[3] floor: the highest fence the caller has seen for this name (0 if none); the
--         counter is first raised to it, so the masters' counters stay close together
-- returns {1, counter}    granted; counter is this master's fence counter after INCR
--         {0, pttl}       held by another; pttl is its remaining time in ms (-1: no expiry)
--
-- Idempotent for its token: a replay (a retried call whose reply was lost) finds the key
-- holding the caller's token and answers {1, the counter} again without counting anew.
--
-- A counter that is gone (eviction, FLUSHALL, a restart without persistence) restarts from
-- this master's clock in microseconds since the epoch (or the caller's floor, if higher):
-- see lock_acquire.lua and docs/fences.md for what that guarantees. The counter expires
-- after max(1 day, 10 ttls) without a grant.
redis.replicate_commands()
local counter
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local current = redis.call('get', KEYS[2])
  local base = current
  if not base then
    local now = redis.call('time')
    base = now[1] .. string.format('%06d', now[2])
  end
  if tonumber(ARGV[3]) > tonumber(base) then
    base = ARGV[3]
  end
  if base ~= current then
    redis.call('set', KEYS[2], base)
  end
  counter = redis.call('incr', KEYS[2])
elseif redis.call('get', KEYS[1]) == ARGV[1] then
  counter = tonumber(redis.call('get', KEYS[2]))
  if not counter then
    return {0, redis.call('pttl', KEYS[1])}
  end
else
  return {0, redis.call('pttl', KEYS[1])}
end
redis.call('pexpire', KEYS[2], math.max(86400000, 10 * tonumber(ARGV[2])))
return {1, counter}
