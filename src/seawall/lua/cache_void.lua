-- Delete a cache entry (voiding any load in flight), or give a load lease back.
-- KEYS[1] value     KEYS[2] load lease     KEYS[3] waiting processes (set of ids)
-- KEYS[4] hit marker
-- ARGV[1] "" to delete the entry and void the lease; else the token of a lease to give
--         back (its load failed), which is dropped only if still current
-- ARGV[2] prefix of the waiters' wake-up channels
-- ARGV[3] invalidation channel (a delete publishes there; a give-back passes "")
-- ARGV[4] invalidation message (drop this key from every process's memory)
-- returns 1 done, 0 the lease was not the caller's any more (nothing touched)
--
-- A delete removes the value and its hit marker with the lease in one step: a plain read
-- (MGET of value and hit marker) never returns a value older than a completed delete.
--
-- Waiters are woken either way (the message carries no value: they read again); one of
-- them takes a new lease and loads.
if ARGV[1] == '' then
  redis.call('del', KEYS[1], KEYS[2], KEYS[4])
  if ARGV[3] ~= '' then
    redis.call('publish', ARGV[3], ARGV[4])
  end
elseif redis.call('get', KEYS[2]) == ARGV[1] then
  redis.call('del', KEYS[2])
else
  return 0
end
local waiting = redis.call('smembers', KEYS[3])
local wake = string.format('%d:%s', #KEYS[1], KEYS[1])
for _, id in ipairs(waiting) do
  redis.call('publish', ARGV[2] .. id, wake)
end
if #waiting > 0 then
  redis.call('del', KEYS[3])
end
return 1
