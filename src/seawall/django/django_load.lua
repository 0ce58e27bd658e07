-- get_or_set's read: the value, or the lease to load it, or a place among the waiters.
-- KEYS[1] the value (the key Django's make_key gives, holding what Django's RedisCache
--         would hold)
-- KEYS[2] load lease: the token of the caller elected to run the callable
-- KEYS[3] waiting processes (set of ids) to wake when the value lands or the lease ends
-- KEYS[4] (optional) the stale copy the last write-back left (OPTIONS stale_ttl)
-- ARGV[1] token for a lease this call takes     ARGV[2] lease ms
-- ARGV[3] id of the calling process's wake-up channel ("" = do not queue it)
-- returns {1, value}            the value is there
--         {2}                   missing; the caller took the lease and runs the callable
--         {3, lease pttl ms}    missing; another caller loads it (this one is queued)
--         {4, stale copy}       missing; another caller loads it, and KEYS[4] holds the
--                               value before: served instead of waiting (not queued)
--
-- Idempotent for its token: a replay finds the lease holding the caller's token and
-- answers {2} again, never {3}, which would have the caller wait out its own lease.
local value = redis.call('get', KEYS[1])
if value then
  return {1, value}
end
if redis.call('set', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {2}
end
if redis.call('get', KEYS[2]) == ARGV[1] then
  return {2}
end
if KEYS[4] then
  local stale = redis.call('get', KEYS[4])
  if stale then
    return {4, stale}
  end
end
if ARGV[3] ~= '' then
  redis.call('sadd', KEYS[3], ARGV[3])
  redis.call('pexpire', KEYS[3], ARGV[2])
end
return {3, redis.call('pttl', KEYS[2])}
